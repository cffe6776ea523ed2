"""Cosmos partial document update: set / replace / add / remove / incr on JSON pointers.

``jsonpointer`` parses a path (RFC 6901 escapes, array-index syntax) and walks to the target's parent; what each
operation does there is Cosmos's, not JSON Patch's: ``set`` creates or overwrites (and appends at an array's end),
``incr`` adds to a number (creating it), ``replace`` and ``remove`` need the target to exist.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from jsonpointer import JsonPointer, JsonPointerException

from airflow_chatter.adapters.memory.documents import MAX_PATCH_OPERATIONS, SYSTEM_PROPERTIES, path_tokens
from airflow_chatter.ports import BadRequest, Document, PatchOperation


def check_patch_targets(operations: Sequence[PatchOperation], partition_key_paths: Sequence[str]) -> None:
    """Refuse a patch count outside 1..10, and patches of the id, a system property or a partition-key path (or an
    ancestor of one: replacing ``/owner`` would move the document's ``/owner/tenant`` key)."""
    if not 1 <= len(operations) <= MAX_PATCH_OPERATIONS:
        raise BadRequest(f"a patch takes 1 to {MAX_PATCH_OPERATIONS} operations, not {len(operations)}")
    key_tokens = [path_tokens(path) for path in partition_key_paths]
    for operation in operations:
        tokens = path_tokens(operation.path)
        if tokens[0] == "id" or tokens[0] in SYSTEM_PROPERTIES:
            raise BadRequest(f"{operation.op} {operation.path}: {tokens[0]} cannot be patched")
        if any(key[: len(tokens)] == tokens for key in key_tokens):
            raise BadRequest(f"{operation.op} {operation.path}: the partition key cannot be patched")


def apply_patch(document: Document, operations: Sequence[PatchOperation]) -> None:
    """Apply operations in order, in place; ``BadRequest`` when a target or its parent is absent or ill-typed.

    The caller patches a private copy, so a failing operation leaves the stored version as it was.
    """
    for operation in operations:
        try:
            parent, last = JsonPointer(operation.path).to_last(document)
        except JsonPointerException as error:
            raise BadRequest(
                f"{operation.op} {operation.path}: the parent of the target is absent ({error})"
            ) from error
        # The value is copied in: a later operation of this patch may change it in place, the caller's object not.
        value = copy.deepcopy(operation.value)
        if isinstance(parent, dict) and isinstance(last, str):
            _patch_member(parent, last, operation, value)
        elif isinstance(parent, list) and last is not None:
            _patch_element(parent, last, operation, value)
        else:
            raise BadRequest(f"{operation.op} {operation.path}: the parent of the target is not an object or array")


def _patch_member(parent: dict[str, Any], name: str, operation: PatchOperation, value: Any) -> None:
    if operation.op in ("replace", "remove") and name not in parent:
        raise BadRequest(f"{operation.op} {operation.path}: the target node is absent")
    if operation.op in ("set", "add", "replace"):
        parent[name] = value
    elif operation.op == "remove":
        del parent[name]
    elif operation.op == "incr":
        parent[name] = _incremented(parent.get(name, 0), value, operation.path)
    else:
        raise BadRequest(f"unsupported patch operation {operation.op!r}")


def _patch_element(parent: list[Any], last: int | str, operation: PatchOperation, value: Any) -> None:
    appending = operation.op in ("add", "set")  # only these may address the end of the array ("-" or its length)
    index = len(parent) if last == "-" else last
    if not isinstance(index, int) or index > len(parent) or (index == len(parent) and not appending):
        raise BadRequest(f"{operation.op} {operation.path}: array index {last!r} is out of range ({len(parent)})")
    if operation.op == "add" or (operation.op == "set" and index == len(parent)):
        parent.insert(index, value)
    elif operation.op in ("set", "replace"):
        parent[index] = value
    elif operation.op == "remove":
        del parent[index]
    elif operation.op == "incr":
        parent[index] = _incremented(parent[index], value, operation.path)
    else:
        raise BadRequest(f"unsupported patch operation {operation.op!r}")


def _incremented(current: Any, amount: Any, path: str) -> Any:
    for role, value in (("increment", amount), ("target", current)):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise BadRequest(f"incr {path}: the {role} is not a number ({value!r})")
    return current + amount

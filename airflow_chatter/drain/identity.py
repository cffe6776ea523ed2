"""Source Identity and processor names (SRC-01..05).

A source identity says which change feed a drain consumes and where it keeps its leases. Its processor name
prefixes every lease document and tags every lease-scoped metric, so it must be deterministic across processes and
injective: two distinct sources must never share one, or one lease set would serve both and a document one source
rejects would be checkpointed past by the other. It is either *declared* by the user (an opaque pair of tokens) or
*ground truth* read from the containers (account endpoint, database id, container id, for both).

The byte encoding follows the reference (brenpike/Chatter ``RelaySourceIdentityKey.ToCanonicalBytes``): a kind tag
byte, then eight components in fixed order, each as its UTF-8 length (Int32, little-endian) and bytes, with the
components the kind does not use left empty. Length prefixes make the encoding injective; the kind tag keeps a
declared name from ever equalling a ground-truth one.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from airflow_chatter.errors import ConfigurationError, DuplicateSourceError
from airflow_chatter.ports import ContainerProperties

PROCESSOR_NAME_PREFIX = "chatter-cosmos-outbox-relay"

SourceKind = Literal["declared", "ground-truth"]

_KIND_TAGS: dict[str, int] = {"declared": 0, "ground-truth": 1}
_COMPONENT_COUNTS: dict[str, int] = {"declared": 2, "ground-truth": 6}


def normalize_endpoint(endpoint: str) -> str:
    """Normalise an account endpoint the way a URI's absolute form does.

    Scheme and host are lower-cased, a default port is dropped and an empty path becomes ``/``, so
    ``https://Acct.documents.azure.com:443`` and ``https://acct.documents.azure.com/`` are one account.
    """
    parts = urlsplit(endpoint.strip())
    if not parts.scheme or not parts.hostname:
        return endpoint
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default_port = {"https": 443, "http": 80}.get(scheme)
    try:
        port = parts.port
    except ValueError:
        return endpoint
    netloc = host if port is None or port == default_port else f"{host}:{port}"
    if parts.username or parts.password:
        return endpoint
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, parts.fragment))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class SourceIdentity:
    """A change-feed source, compared component by component; ``processor_name`` is derived from it."""

    kind: SourceKind
    components: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.kind not in _KIND_TAGS:
            raise ConfigurationError("kind", self.kind, "must be 'declared' or 'ground-truth'")
        components = tuple(self.components)
        if len(components) != _COMPONENT_COUNTS[self.kind] or not all(isinstance(c, str) for c in components):
            raise ConfigurationError(
                "components",
                self.components,
                f"must be {_COMPONENT_COUNTS[self.kind]} strings for a {self.kind} identity",
            )
        object.__setattr__(self, "components", components)

    @classmethod
    def declared(cls, monitored_token: str, lease_token: str) -> SourceIdentity:
        """An identity the user declared: two opaque, non-blank tokens compared for equality only."""
        for option, value in (("monitored_source_identity", monitored_token), ("lease_source_identity", lease_token)):
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError(option, value, "must be a non-blank string")
        return cls("declared", (monitored_token, lease_token))

    @classmethod
    def ground_truth(cls, monitored: ContainerProperties, lease: ContainerProperties) -> SourceIdentity:
        """An identity read from the containers: endpoint, database and container of both (SRC-02).

        The endpoint is part of it, so same-named containers in two accounts are two sources.
        """
        return cls(
            "ground-truth",
            (
                normalize_endpoint(monitored.account_endpoint),
                monitored.database_id,
                monitored.container_id,
                normalize_endpoint(lease.account_endpoint),
                lease.database_id,
                lease.container_id,
            ),
        )

    def canonical_bytes(self) -> bytes:
        """The injective, length-prefixed encoding the processor name hashes."""
        padded = (*self.components, "", "", "", "", "", "") if self.kind == "declared" else ("", "", *self.components)
        out = bytearray([_KIND_TAGS[self.kind]])
        for component in padded:
            raw = component.encode("utf-8")
            out += struct.pack("<i", len(raw))
            out += raw
        return bytes(out)

    @property
    def processor_name(self) -> str:
        """``chatter-cosmos-outbox-relay:`` + b64url(SHA-256(canonical bytes)); stable across processes (SRC-03)."""
        return f"{PROCESSOR_NAME_PREFIX}:{_b64url(hashlib.sha256(self.canonical_bytes()).digest())}"


def instance_name() -> str:
    """A name unique to this process: ``chatter-cosmos-outbox-relay:{host}:{uuid4}`` (SRC-03)."""
    return f"{PROCESSOR_NAME_PREFIX}:{socket.gethostname()}:{uuid.uuid4()}"


@dataclass(frozen=True)
class RegisteredSource:
    """One source as the registry recorded it."""

    name: str
    identity: SourceIdentity
    additional_pending_filter: Callable[..., Any] | None
    body_resolver: Callable[..., Any] | None

    @property
    def processor_name(self) -> str:
        return self.identity.processor_name


class SourceRegistry:
    """Sources by processor name; a second source on a taken processor name fails fast (SRC-01, SRC-04).

    Two sources over the same containers that differ only in filter or resolver would share one lease set, so a
    document the first rejects would be checkpointed past by it and never drained by the second. A filter or
    resolver cannot be part of a lease key, so the sources must declare distinct identities instead. Registering the
    very same source again (same name, identity, filter and resolver) is idempotent.
    """

    def __init__(self) -> None:
        self._by_processor: dict[str, RegisteredSource] = {}

    def register(
        self,
        identity: SourceIdentity,
        name: str,
        additional_pending_filter: Callable[..., Any] | None = None,
        body_resolver: Callable[..., Any] | None = None,
    ) -> RegisteredSource:
        """Record a source; ``DuplicateSourceError`` naming both sources if its processor name is taken."""
        source = RegisteredSource(name, identity, additional_pending_filter, body_resolver)
        existing = self._by_processor.get(identity.processor_name)
        if existing is not None:
            if existing == source:
                return existing
            raise DuplicateSourceError(identity.processor_name, existing.name, name)
        for other in self._by_processor.values():
            if other.name == name:
                # One name on two identities would make logs and errors ambiguous about which source failed.
                raise ConfigurationError(
                    "name", name, f"is already the name of the source with processor name {other.processor_name!r}"
                )
        self._by_processor[identity.processor_name] = source
        return source

    def get(self, processor_name: str) -> RegisteredSource | None:
        """The source registered under ``processor_name``, if any."""
        return self._by_processor.get(processor_name)

    def __iter__(self) -> Iterator[RegisteredSource]:
        return iter(tuple(self._by_processor.values()))

    def __len__(self) -> int:
        return len(self._by_processor)


__all__ = [
    "PROCESSOR_NAME_PREFIX",
    "RegisteredSource",
    "SourceIdentity",
    "SourceKind",
    "SourceRegistry",
    "instance_name",
    "normalize_endpoint",
]

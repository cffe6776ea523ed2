"""docs/ is part of the product: it builds, its links, anchors and includes resolve, and it names no machine path."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: Paths that exist only on the machine a file was written on.
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|home|Users|tmp/pytest-of-\w+)/[\w.-]+")


def _tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, timeout=60)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout: {listed.stderr.strip()}")
    return [REPO / name for name in listed.stdout.splitlines() if (REPO / name).is_file()]


def test_the_docs_build_strictly_with_every_link_anchor_include_and_page_in_the_nav(tmp_path: Path) -> None:
    """mkdocs --strict fails on a broken link or anchor, a missing snippet include, or a page left out of the nav."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    result = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "drain_all" in api and "--8&lt;--" not in api, "the API page includes the tested example, not the marker"


def test_no_tracked_file_names_a_machine_path() -> None:
    offenders = []
    for path in _tracked_files():
        if path.suffix in {".png", ".jpg", ".pem", ".lock"} or path.name == "package-lock.json":
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        offenders += [
            f"{path.relative_to(REPO)}:{n}: {m.group(0)}"
            for n, line in enumerate(text.splitlines(), 1)
            for m in MACHINE_PATH.finditer(line)
        ]
    assert offenders == [], "\n".join(offenders)


def test_every_relative_link_of_the_readme_resolves() -> None:
    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(((?!https?:|#)[^)#\s]+)", readme)
    assert targets, "the README links into docs/"
    missing = [t for t in targets if not (REPO / t).exists()]
    assert missing == [], f"README links to missing files: {missing}"


def _fenced_blocks(language: str) -> list[tuple[str, int, str]]:
    """Every ``` block of ``language`` in docs/*.md: (page, line, text)."""
    blocks = []
    for page in sorted((REPO / "docs").glob("*.md")):
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            if line.strip() == f"```{language}":
                end = next(i for i in range(number + 1, len(lines)) if lines[i].strip() == "```")
                blocks.append((page.name, number + 1, "\n".join(lines[number + 1 : end])))
    return blocks


@pytest.mark.parametrize(("page", "line", "text"), _fenced_blocks("yaml"), ids=lambda v: str(v)[:40])
def test_every_yaml_block_of_the_docs_parses(page: str, line: int, text: str) -> None:
    """A user copies these into files (sources, values, manifests): each must be YAML, not prose that looks like it."""
    import yaml

    assert list(yaml.safe_load_all(text)), f"{page}:{line}: an empty YAML block"

"""The README and docs/: every relative link and image points to a file that exists, and every #anchor to a heading."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(page: Path) -> str:
    """The page without code blocks and code spans, where brackets are code, not links."""
    return CODE_SPAN.sub("", FENCE.sub("", page.read_text()))


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#{1,6}\s+(.*?)\s*$", FENCE.sub("", page.read_text()), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page)) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_the_pages_exist_and_link_somewhere():
    assert (ROOT / "README.md").exists() and len(PAGES) > 1, PAGES
    assert sum(len(relative_links(page)) for page in PAGES) >= len(PAGES), "no relative links found: nothing checked"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file(page):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, broken


def test_the_api_table_lists_exactly_the_top_level_exports():
    import attention_viz

    page = (ROOT / "docs" / "package.md").read_text()
    section = page.split("## Top-level API", 1)[1].split("\n## ", 1)[0]
    names = {name for row in section.splitlines() if row.startswith("| `")
             for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert names == set(attention_viz.__all__), (names ^ set(attention_viz.__all__))


def test_the_layout_page_names_every_module_and_only_modules_that_exist():
    page = (ROOT / "docs" / "layout.md").read_text()
    block = re.search(r"^```\n(.*?)^```", page, flags=re.S | re.M).group(1)
    listed = {line.split()[0] for line in block.splitlines() if line.strip()}
    package = ROOT / "attention_viz"
    modules = {p.name for p in package.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    folders = {p.name + "/" for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert modules | folders <= listed, sorted((modules | folders) - listed)
    paths = [p for p in ROOT.rglob("*") if ".git" not in p.parts]
    tree = {p.name + "/" if p.is_dir() else p.name for p in paths}
    last = {name: name.rstrip("/").split("/")[-1] + ("/" if name.endswith("/") else "") for name in listed}
    assert all(part in tree for part in last.values()), sorted(n for n, part in last.items() if part not in tree)


def test_the_readme_layout_names_every_subpackage_and_only_paths_that_exist():
    readme = (ROOT / "README.md").read_text()
    section = re.search(r"^## Layout\n(.*?)^## ", readme, flags=re.S | re.M).group(1)
    named = set(re.findall(r"`([^`\s]+)`", section))
    package = ROOT / "attention_viz"
    folders = {p.name + "/" for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    assert folders | modules <= named, sorted((folders | modules) - named)
    missing = [name for name in named if not ((ROOT / name).exists() or (package / name).exists())]
    assert not missing, missing
"""LICENSE, CITATION.cff and the README's BibTeX agree on how to cite the paper."""

import re

import yaml

from brorl_lib.core.paths import REPO_ROOT

ARXIV_ID = "2510.01180"


def citation() -> dict:
    return yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def readme_bibtex() -> str:
    blocks = re.findall(r"```bibtex\n(.*?)```", (REPO_ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "the README holds one BibTeX block"
    return blocks[0]


def bibtex_field(entry: str, name: str) -> str:
    match = re.search(rf"^\s*{name}\s*=\s*\{{(.*)\}},?\s*$", entry, re.M)
    assert match, f"BibTeX field {name} missing"
    return match.group(1)


def test_citation_cff_parses_and_names_the_paper():
    cff = citation()
    assert cff["cff-version"] == "1.2.0" and cff["license"] == "Apache-2.0"
    paper = cff["preferred-citation"]
    assert paper["type"] == "article" and paper["year"] == 2025
    assert paper["url"] == f"https://arxiv.org/abs/{ARXIV_ID}"
    assert any(i["value"] == f"arXiv:{ARXIV_ID}" for i in paper["identifiers"])
    assert len(paper["authors"]) == 11
    assert all(a.get("given-names") and a.get("family-names") for a in paper["authors"])


def test_readme_bibtex_matches_citation_cff():
    paper = citation()["preferred-citation"]
    entry = readme_bibtex()
    assert entry.startswith("@article{hu2025brorl,")
    assert bibtex_field(entry, "title") == paper["title"]
    authors = [a.strip() for a in bibtex_field(entry, "author").split(" and ")]
    assert len(authors) == len(paper["authors"])
    assert authors == [f"{a['family-names']}, {a['given-names']}" for a in paper["authors"]]
    assert ARXIV_ID in bibtex_field(entry, "journal") and bibtex_field(entry, "year") == str(paper["year"])


def test_licence_is_apache_and_named_in_the_readme():
    text = (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "Copyright 2026 The BroRL companion authors" in text
    assert "Apache-2.0" in (REPO_ROOT / "README.md").read_text(encoding="utf-8")

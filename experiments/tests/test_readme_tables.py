"""experiments/readme_tables.py: the generated tables of the README and docs/ are what `protoembed report --summary` writes."""

from __future__ import annotations

#: every table is made by `protoembed report` in a child interpreter


def test_readme_tables_are_current():
    """The generated tables of the README and the docs pages equal what `protoembed report --summary`
    makes from the records now."""
    from experiments import readme_tables

    root = readme_tables.ROOT
    pages = {
        path.relative_to(root).as_posix(): path.read_text(encoding="utf-8") for path in readme_tables.pages()
    }
    # the README's summary of the unsupervised study; the study page's: the same, and before its fixes
    counts = {
        name: (text.count("<!-- protoembed report "), text.count("<!-- end report -->"))
        for name, text in pages.items()
    }
    assert counts == {"README.md": (1, 1), "docs/papers.md": (2, 2)}
    for name, text in pages.items():
        assert readme_tables.render(text, name) == text, name


def test_readme_tables_rewrite_and_check(tmp_path, capsys):
    from experiments import readme_tables

    block = (
        "<!-- protoembed report docs/results/unsup-cpu/untrained-default --summary --label "
        "untrained-default=untrained -->\n| stale |\n<!-- end report -->\n"
    )
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n\n{block}\nafter\n")
    assert readme_tables.main([str(readme), "--check"]) == 1
    assert readme_tables.main([str(readme)]) == 0
    text = readme.read_text()
    assert "| stale |" not in text and "| untrained | " in text and text.endswith("after\n")
    assert readme_tables.main([str(readme), "--check"]) == 0
    readme.write_text("<!-- protoembed report docs/nowhere --summary -->\n<!-- end report -->\n")
    assert readme_tables.main([str(readme)]) == 2
    err = capsys.readouterr().err
    assert "docs/nowhere: no such results file or folder" in err

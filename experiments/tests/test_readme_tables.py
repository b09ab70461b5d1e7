"""experiments/readme_tables.py: the README's generated tables are what `protoembed report --summary` writes."""

from __future__ import annotations

from pathlib import Path

#: every table is made by `protoembed report` in a child interpreter


def test_readme_tables_are_current():
    """The README's generated tables equal what `protoembed report --summary` makes from the records now."""
    from experiments import readme_tables

    readme = Path(readme_tables.ROOT / "README.md").read_text(encoding="utf-8")
    # two generated tables (the unsupervised study, and before its fixes), each opened and closed once
    assert readme.count("<!-- protoembed report ") == readme.count("<!-- end report -->") == 2
    assert readme_tables.render(readme, "README.md") == readme


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

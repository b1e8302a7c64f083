"""The README's Python example runs as written."""

import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_example_runs(tmp_path, monkeypatch):
    text = README.read_text()
    section = text[text.index("## Python") :]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # the second run opens the store the first created
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(example, str(README), "exec"), {})
        assert out.getvalue() == "b'\\xff\\xd8...' [(b'2024/cat.jpg', 5)]\n"
    assert (tmp_path / "demo-store" / "SUPERBLOCK").exists()

"""benchmarks.layout counts modules, code lines and imports between folders as written."""

from benchmarks import layout


def test_a_small_package_is_counted_as_written(tmp_path):
    package = tmp_path / "pkg"
    (package / "base").mkdir(parents=True)
    (package / "readers").mkdir()
    (package / "__init__.py").write_text('"""The package."""\nVERSION = "1"\n')
    (package / "cli.py").write_text("from pkg.readers import md\n\n# a comment\n\ndef main():\n    return md\n")
    (package / "base" / "__init__.py").write_text("")
    (package / "base" / "sysfs.py").write_text('"""Reads."""\n\n\ndef read():\n    """One."""\n    return 1\n')
    (package / "readers" / "__init__.py").write_text("")
    (package / "readers" / "md.py").write_text("from ..base import sysfs\nfrom . import other\n\n"
                                                "def f():\n    from pkg.base.sysfs import read\n    return read\n")
    (package / "readers" / "other.py").write_text("X = 1\n")
    per_folder, edges = layout.layout(str(package))
    assert per_folder == {"(root)": [2, 4], "base": [2, 2], "readers": [3, 6]}
    assert edges == {("(root)", "readers"): 1, ("readers", "base"): 1}


def test_the_package_root_is_one_row_of_few_modules():
    per_folder, _ = layout.layout()
    assert per_folder["(root)"][0] <= 5

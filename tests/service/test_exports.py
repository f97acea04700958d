"""service.exports.ExportFolder: bounded per client and overall, removed at close, a killed server's folder removed
by the next one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from attention_viz.service.exports import LOCK_NAME, PREFIX, ExportFolder, remove_leftovers


def export(folder: ExportFolder, client: str | None, size: int = 10):
    return folder.write({"a.csv": b"x" * size, "b.npz": b"y" * size}, client)


def test_each_client_keeps_its_last_few_exports(tmp_path):
    folder = ExportFolder(per_client=2, parent=tmp_path)
    first, second, third = (export(folder, "alice") for _ in range(3))
    bob = export(folder, "bob")
    assert not first[0].parent.exists()  # alice's oldest went when her third came
    assert all(p.is_file() for p in second + third + bob)
    assert folder.folders() == 3 and folder.bytes == 3 * 20


def test_a_flood_of_clients_is_bounded_by_count_and_by_bytes_oldest_first(tmp_path):
    folder = ExportFolder(kept=5, max_bytes=10_000, per_client=2, parent=tmp_path)
    made = [export(folder, f"client-{i}") for i in range(50)]  # every export from a new, invented session
    assert folder.folders() == 5 and [p for paths in made[:45] for p in paths if p.exists()] == []
    assert all(p.is_file() for paths in made[45:] for p in paths)
    big = [export(folder, f"big-{i}", size=2_000) for i in range(4)]  # 4 kB each: two fit in 10 kB
    assert folder.bytes <= 10_000 and all(p.is_file() for p in big[-1] + big[-2])
    assert not big[0][0].exists() and not big[1][0].exists()
    on_disk = sum(p.stat().st_size for p in folder.root.rglob("*") if p.is_file())
    assert on_disk == folder.bytes
    huge = export(folder, "huge", size=50_000)  # larger than the cap alone: the newest export is still there
    assert all(p.is_file() for p in huge) and folder.folders() == 1


def test_exports_from_python_count_against_the_overall_caps_only(tmp_path):
    folder = ExportFolder(kept=8, per_client=1, parent=tmp_path)
    made = [export(folder, None) for _ in range(6)]
    assert all(p.is_file() for paths in made for p in paths)


def test_close_removes_the_folder(tmp_path):
    folder = ExportFolder(parent=tmp_path)
    export(folder, "alice")
    root = folder.root
    folder.close()
    assert not root.exists() and list(tmp_path.iterdir()) == []


def test_a_killed_servers_folder_is_removed_by_the_next_one_and_a_running_ones_is_not(tmp_path):
    """A process makes an ExportFolder and dies at once (os._exit: no clean-up); the next ExportFolder in the same
    parent removes its folder. A live one's (this process's), and folders that are not ours, stay."""
    code = textwrap.dedent(f"""
        import os, pathlib
        from attention_viz.service.exports import ExportFolder
        folder = ExportFolder(parent=pathlib.Path({str(tmp_path)!r}))
        folder.write({{"a.csv": b"1"}}, "alice")
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd())
    left = [p for p in tmp_path.iterdir() if p.name.startswith(PREFIX)]
    assert len(left) == 1 and (left[0] / LOCK_NAME).is_file()  # what a killed server leaves behind
    alive = ExportFolder(parent=tmp_path)  # a running server's (this process holds its lock)
    assert not left[0].exists()
    other = tmp_path / f"{PREFIX}not-ours"  # no lock file: not made by an ExportFolder, left alone
    other.mkdir()
    nxt = ExportFolder(parent=tmp_path)
    assert other.is_dir() and alive.root.is_dir() and nxt.root.is_dir()
    assert remove_leftovers(tmp_path) == 0 and alive.root.is_dir() and nxt.root.is_dir()
    alive.close()
    nxt.close()

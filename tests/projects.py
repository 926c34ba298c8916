"""Small benchmark projects on disk for integration tests: a folder knowledge base, eval cases, a config."""

import json
from pathlib import Path


def write_project(root: Path, documents: dict[str, str], cases: list[dict], config: str) -> None:
    """`root/kb/<document>`, `root/cases.jsonl` and `root/config.yaml`: the shared lines (folder knowledge
    base, the cases, output in `root/out`) followed by `config`."""
    for name, text in documents.items():
        path = root / "kb" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "cases.jsonl").write_text("\n".join(json.dumps(case) for case in cases))
    (root / "config.yaml").write_text(
        "knowledge_base: {kind: folder, path: kb}\neval_cases: cases.jsonl\noutput_dir: out\n" + config
    )

"""`review`: label a run's answers (or a testset run's candidates) on a page on 127.0.0.1, then publish
the labels as a new `review_labels` version."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from cli.command import Command, add_config_options, config_of
from cli.launch import open_store
from ragbench.review.server import REVIEW_PORT


class ReviewCommand(Command):
    name = "review"
    help = (
        "label a run's answers (or, with --testset, a generated eval set's candidates) on a page on 127.0.0.1"
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_config_options(parser)
        parser.add_argument("--run", help="the run to review (default: the newest completed one)")
        parser.add_argument("--rubric", help="the rubric to label (default: the one the judge is checked on)")
        parser.add_argument("--labels", help="the labels file (default: OUTPUT_DIR/review_labels.jsonl)")
        parser.add_argument(
            "--testset", action="store_true", help="a testset run's candidates, to keep or reject"
        )
        parser.add_argument(
            "--port", type=int, default=REVIEW_PORT, help=f"the port on 127.0.0.1 (default {REVIEW_PORT})"
        )

    def run(self, args: argparse.Namespace) -> int:
        """Serve the review page until Ctrl-C, then publish the labels."""
        from ragbench.review.labels import LabelStore
        from ragbench.review.sampling import SAMPLE_ORDERS, sample_progress_sentence
        from ragbench.review.server import ReviewServer, ReviewSession
        from ragbench.runs import review

        config = config_of(args)
        open_store()
        labels_path = Path(args.labels or Path(config.output_dir) / "review_labels.jsonl")
        store = LabelStore(labels_path)
        if args.testset:
            run_name, items = review.candidate_items_of_run(args.run)
        else:
            run_name, items = review.answer_items_of_run(args.run, args.rubric, config.name)
        correction = config.evaluation.label_correction
        session = ReviewSession(
            items,
            store,
            title=f"review of {run_name}",
            seed=config.generation.seed,
            target_width=correction.target_width if correction is not None else 0.2,
        )
        server = ReviewServer(session, port=args.port)
        # Ctrl-C, or SIGTERM from a process manager, stops serving; then the labels are published
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        print(
            f"review page: {server.url}  ({len(items)} items; labels saved to {labels_path}; Ctrl-C to stop)"
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        for found in session.agreement():
            print(found.sentence())
        for order in SAMPLE_ORDERS:
            for progress in session.progress(order):
                if progress["sampled_cases"]:
                    print(sample_progress_sentence(order, progress))
        if args.testset:
            exported = review.write_text(
                labels_path.with_name("testset_labels.jsonl"),
                review.testset_labels_jsonl(store.labels, items),
            )
            print(f"candidate labels for testset.labels: {exported}")
        published = review.publish_labels(store.labels)
        if published:
            print(
                f"labels published as the artifact {published} (evaluation.judge_alignment.labels, "
                "evaluation.label_correction.labels)"
            )
        return 0

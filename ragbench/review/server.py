"""The review page's server: a standard-library HTTP server on 127.0.0.1 only, for one person on their
own machine (four routes; a web framework would add a dependency and nothing this needs).

The page is a static shell and a script that fills it with `textContent`, never HTML, so an answer or a
passage that holds markup shows as text. A judge's verdict is sent only for an item the person has
labelled (blinding). A label is written to the labels file (`LabelStore`) before the page hears it is
saved. Requests must name this server's own host (a page of another site cannot reach it by DNS
rebinding) and a label must be posted as JSON (a form of another site cannot post one).
"""

from __future__ import annotations

import ipaddress
import json
import math
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from typing import Any

from pydantic import ValidationError

from ragbench.review.agreement import Agreement, agreement
from ragbench.review.labels import Label, LabelStore
from ragbench.review.queue import ORDERS, ReviewItem, ordered
from ragbench.review.sampling import SAMPLE_ORDERS, SamplePlan, draws, sample_order, sample_progress

# the queue's orders, then the ones that draw a random sample (whose labels can correct the numbers)
PAGE_ORDERS: tuple[str, ...] = (*ORDERS, *SAMPLE_ORDERS)

ASSETS = files("ragbench.review")
REVIEW_PORT = 8238  # beside ZenML's dashboard (8237)


class ReviewSession:
    """The queue and the labels of one page: what the routes read and write, without HTTP."""

    def __init__(
        self,
        items: Sequence[ReviewItem],
        store: LabelStore,
        *,
        title: str,
        seed: int = 0,
        target_width: float = 0.2,
    ):
        if not items:
            raise ValueError("nothing to review: the run has no answer the rubric grades")
        self.items = {item.key: item for item in items}
        self.store = store
        self.title = title
        self.seed = seed
        self.target_width = target_width  # the interval width the sample orders' planning figures aim at
        # each sample order's draw per case, kept with the labels given in that order
        self.draws = {
            order: draws(items, SamplePlan(weighting=weighting, seed=seed))
            for order, weighting in SAMPLE_ORDERS.items()
        }

    def queue(self, order: str) -> list[ReviewItem]:
        """Every item once in `order`: a queue order, or a sample order (a case's answers together)."""
        items = list(self.items.values())
        if order in SAMPLE_ORDERS:
            return sample_order(items, SamplePlan(weighting=SAMPLE_ORDERS[order], seed=self.seed))
        return ordered(items, order, self.seed)  # type: ignore[arg-type]

    def _labels(self) -> dict[str, Label]:
        return {"|".join(label.key): label for label in self.store.labels.current()}

    def counts(self, order: str, item: ReviewItem, label: Label | None) -> bool:
        """Does `label` count as `item`'s label in `order`? On a sample order only one drawn in that order's
        plan with this run's weight (what a run's correction uses): a label given in another order, plan or
        run leaves the case unlabelled for the sample, so the page asks it again. A label of an answer this
        run does not contain is never an item's label (the answer is in the key)."""
        if label is None:
            return False
        if order not in SAMPLE_ORDERS:
            return True
        draw = self.draws[order].get(item.input.case_id)
        given = label.sample
        return (
            draw is not None
            and given is not None
            and given.plan == draw.plan
            and math.isclose(given.weight, draw.weight, rel_tol=1e-9)
        )

    def state(self, order: str) -> dict[str, Any]:
        labels = self._labels()
        items = self.queue(order)
        queue = [self._public(item, labels.get(item.key)) for item in items]
        counted = [self.counts(order, item, labels.get(item.key)) for item in items]
        for shown, counts in zip(queue, counted, strict=True):
            shown["counts"] = counts
        # the item asked next: the first whose label does not count (on a sample order, where its sample
        # ends: labelling it brings in the labelled cases after it)
        asked = next((at for at, counts in enumerate(counted) if not counts), 0)
        return {
            "title": self.title,
            "order": order,
            "orders": list(PAGE_ORDERS),
            "sample": order in SAMPLE_ORDERS,
            "progress": self.progress(order),
            "items": queue,
            "next": asked,
            "agreement": self._agreement_rows(),
        }

    def _public(self, item: ReviewItem, label: Label | None) -> dict[str, Any]:
        shown = {
            "key": item.key,
            "kind": item.kind,
            "criterion": item.criterion_label,
            "scale": item.scale,
            "question": item.input.question,
            "history": [turn.model_dump(mode="json") for turn in item.input.history],
            "searched": item.searched,
            "answer": item.input.answer,
            "reference": item.input.reference_answer,
            "passages": [
                {"source": s, "text": t} for s, t in zip(item.sources, item.input.contexts, strict=False)
            ],
            "label": None,
        }
        if label is not None:  # only now the verdicts: the person has given theirs
            shown["label"] = {"value": label.value, "note": label.note}
            shown |= self._revealed(item)
        return shown

    @staticmethod
    def _revealed(item: ReviewItem) -> dict[str, Any]:
        return {
            "verdicts": item.verdicts,
            "reasoning": item.reasoning,
            "keyword_failures": item.keyword_failures,
        }

    def label(self, key: str, value: int, note: str = "", order: str | None = None) -> dict[str, Any]:
        """Store the person's verdict on item `key`; returns what is revealed now and the agreement. A label
        given in a sample order keeps its case's draw, so a run can count it as part of that sample."""
        item = self.items.get(key)
        if item is None:
            raise KeyError(f"no item {key!r} on this page")
        if order is not None and order not in PAGE_ORDERS:
            raise ValueError(f"unknown order {order!r}")
        self.store.add(
            Label(
                kind=item.kind,
                case_id=item.input.case_id,
                answer_sha=item.answer_sha,
                rubric=item.rubric,
                criterion=item.criterion,
                scale=item.scale,
                value=value,
                note=note.strip(),
                item=item.input,
                judge_verdicts=item.verdicts,
                sample=self.draws[order].get(item.input.case_id) if order in SAMPLE_ORDERS else None,
            )
        )
        return self._revealed(item) | {
            "label": {"value": value, "note": note.strip()},
            "counts": True,  # given in this order (a sample order's with its draw): it counts here
            "agreement": self._agreement_rows(),
            "progress": self.progress(order) if order is not None else [],
        }

    def progress(self, order: str) -> list[dict[str, Any]]:
        """On a sample order, how far its sample has got (`sample_progress`); nothing on another order."""
        if order not in SAMPLE_ORDERS:
            return []
        plan = SamplePlan(weighting=SAMPLE_ORDERS[order], seed=self.seed)
        return sample_progress(
            list(self.items.values()), self.store.labels.current(), plan, self.target_width
        )

    def _agreement_rows(self) -> list[dict[str, Any]]:
        """The agreement as the page shows it: each one's numbers, its sentence and its interval's text."""
        return [
            found.model_dump() | {"sentence": found.sentence(), "interval": found.interval()}
            for found in self.agreement()
        ]

    def agreement(self) -> list[Agreement]:
        """Each judge against every current label of this page's criteria (earlier sessions' too)."""
        criteria = {(item.kind, item.rubric, item.criterion, item.scale) for item in self.items.values()}
        found = []
        for kind, rubric, criterion, scale in sorted(criteria):
            pairs: dict[str, list[tuple[int, int]]] = {}
            for label in self.store.labels.of(rubric, criterion, kind):
                for judge, score in label.judge_verdicts.items():
                    pairs.setdefault(judge, []).append((label.value, score))
            found += [
                agreement(p, rubric=rubric, criterion=criterion, judge=judge, scale=scale, seed=self.seed)
                for judge, p in sorted(pairs.items())
            ]
        return found


def _loopback(host: str) -> str:
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"the review page binds to a loopback address only (127.0.0.1), not {host}")
    return host


class ReviewServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, session: ReviewSession, host: str = "127.0.0.1", port: int = 0):
        self.session = session
        super().__init__((_loopback(host), port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def start(self) -> threading.Thread:
        """Serve in a background thread (tests, or a caller with work of its own)."""
        thread = threading.Thread(target=self.serve_forever, name="review-page", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: ReviewServer

    def log_message(self, format: str, *args: Any) -> None:
        return  # one line per request drowns the terminal's progress

    def _host_ok(self) -> bool:
        host, port = self.server.server_address[:2]
        allowed = {f"{host}:{port}", f"localhost:{port}"}
        if self.headers.get("Host") in allowed:
            return True
        self._send(403, "text/plain", b"unexpected Host header")
        return False

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, value: Any) -> None:
        self._send(status, "application/json", json.dumps(value).encode())

    def do_GET(self) -> None:
        if not self._host_ok():
            return
        path, _, query = self.path.partition("?")
        if path == "/":
            self._send(200, "text/html", ASSETS.joinpath("page.html").read_bytes())
        elif path == "/review.js":
            self._send(200, "text/javascript", ASSETS.joinpath("review.js").read_bytes())
        elif path == "/api/state":
            order = dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("order", "disagreement")
            if order not in PAGE_ORDERS:
                self._json(400, {"error": f"unknown order {order!r}"})
                return
            self._json(200, self.server.session.state(order))
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self) -> None:
        if not self._host_ok():
            return
        if self.path != "/api/label" or self.headers.get_content_type() != "application/json":
            self._json(
                404 if self.path != "/api/label" else 415, {"error": "post a label as JSON to /api/label"}
            )
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if not isinstance(body, dict):
                raise ValueError("a label is a JSON object: {key, value, note}")
            value, note, order = body.get("value"), body.get("note") or "", body.get("order")
            if not isinstance(value, int) or isinstance(value, bool) or not isinstance(note, str):
                raise ValueError("value must be an integer and note a string")
            if order is not None and not isinstance(order, str):
                raise ValueError("order must be a string")
            revealed = self.server.session.label(str(body.get("key")), value, note, order)
        except KeyError as error:
            self._json(400, {"error": f"missing or unknown {error}"})
        except ValidationError as error:
            self._json(400, {"error": "; ".join(problem["msg"] for problem in error.errors())})
        except ValueError as error:
            self._json(400, {"error": str(error)})
        else:
            self._json(200, revealed)

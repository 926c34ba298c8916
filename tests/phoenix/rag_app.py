"""A small real LangChain RAG app, traced the way a deployed one is: OpenInference's LangChain instrumentor
and the OpenTelemetry SDK, its spans exported over OTLP/HTTP to a Phoenix server and/or written to an
OTLP/JSON Lines file. The traces tests read those spans back (from Phoenix's REST API or the file) as eval
cases, so what they read is what the instrumentor really records, not a hand-written imitation.

Run with .venv-phoenix's Python (`make phoenix-venv`):

    .venv-phoenix/bin/python tests/phoenix/rag_app.py --kb DIR --questions FILE \\
        [--phoenix-endpoint http://127.0.0.1:PORT/v1/traces] [--otlp-file PATH] [--project NAME] \\
        [--broken-retriever]

The knowledge base is a folder of .md files; the questions a JSON list of {"question": str, "history":
[{"role", "content"}...] (optional, the turns before), "tags": [str...] (optional)}. Nothing here reaches
a network but the Phoenix endpoint: the retriever scores keyword overlap and the chat model answers from
the retrieved context (the first sentence of the first passage), so the answers are deterministic.

Each question is one trace: a CHAIN root (input {"question", "history"?}, output the answer) with a
RETRIEVER and an LLM span below it. A question's tags go on every span of its trace as `tag.tags`, through
OpenInference's `using_tags` (the instrumentor does not record LangChain's own run tags). One line per
question is printed: the trace id, a tab, the question. The exit status is non-zero if any span could not
be exported.

What OpenInference (openinference-instrumentation-langchain 0.1.80) records of a retrieved document is its
content and its metadata (as JSON), not its `id` nor a score: the file name is in the metadata's `source`
and the overlap in its `score`. Phoenix's REST API gives that metadata back flattened
(`retrieval.documents.0.document.metadata.source`...), the file keeps it as one JSON string.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from langchain_core.callbacks import CallbackManagerForLLMRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnablePassthrough
from openinference.instrumentation import capture_span_context, using_tags
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import format_trace_id

# Phoenix files a span under the project its resource names (phoenix/utilities/project.py reads this
# attribute; without it, the project is "default").
PROJECT_ATTRIBUTE = "openinference.project.name"
NOT_FOUND = "I could not find that."
CONTEXT_SEPARATOR = "\n---\n"
QUESTION_MARKER = "\n\nQuestion: "
# Words that say nothing about a passage's subject, left out of the overlap, with those of three letters or
# fewer: a question shares "what" or "does" with any passage.
STOPWORDS = frozenset({"what", "which", "when", "where", "does", "with", "that", "this", "from", "have"})


def words(text: str) -> set[str]:
    """The words that count for overlap: lower-cased, four letters or more, no stopword."""
    return {
        word for word in re.findall(r"[a-z0-9]+", text.lower()) if len(word) > 3 and word not in STOPWORDS
    }


class KeywordRetriever(BaseRetriever):
    """The knowledge base's files ranked by the share of the question's words they hold, the top `k`; or,
    `broken`, the one file that shares the fewest (a deployment whose index points at the wrong data).
    Each document's id and metadata `source` is its file name, its metadata `score` the share."""

    files: dict[str, str]
    k: int = 2
    broken: bool = False

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        asked = words(query)
        scored = sorted(
            ((len(asked & words(text)) / max(len(asked), 1), name) for name, text in self.files.items()),
            key=lambda pair: (-pair[0], pair[1]),
        )
        chosen = scored[-1:] if self.broken else scored[: self.k]
        return [
            Document(
                id=name,
                page_content=self.files[name],
                metadata={"source": name, "score": round(score, 4)},
            )
            for score, name in chosen
        ]


class ContextEchoModel(BaseChatModel):
    """A chat model without a network: it answers with the first sentence of the first context passage in
    the last message, or NOT_FOUND when the context shares no word with the question. It reports token
    usage (words, as OpenAI's chat models report tokens, in llm_output's token_usage), which OpenInference
    records as llm.token_count.*."""

    @property
    def _llm_type(self) -> str:
        return "context-echo"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        context, _, question = str(messages[-1].content).partition(QUESTION_MARKER)
        passage = context.removeprefix("Context:\n").split(CONTEXT_SEPARATOR)[0]
        prose = " ".join(line for line in passage.splitlines() if line.strip() and not line.startswith("#"))
        sentence = re.match(r".*?[.!?](?=\s|$)", prose)
        answer = (sentence.group(0) if sentence else prose) if words(question) & words(context) else NOT_FOUND
        prompt_tokens = sum(len(str(message.content).split()) for message in messages)
        completion_tokens = len(answer.split())
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=answer))],
            llm_output={"token_usage": usage, "model_name": self._llm_type},
        )


def rag_chain(retriever: BaseRetriever) -> Runnable[dict[str, Any], str]:
    """question (and history) -> retrieved context -> prompt -> model -> answer, composed with LCEL, so the
    whole run is one CHAIN span ("rag") over the RETRIEVER and LLM spans."""
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer the question from the context only. If it is not there, say so."),
            MessagesPlaceholder("history", optional=True),
            ("human", "Context:\n{context}" + QUESTION_MARKER + "{question}"),
        ]
    )

    def joined(documents: list[Document]) -> str:
        return CONTEXT_SEPARATOR.join(document.page_content for document in documents)

    chain = (
        RunnablePassthrough.assign(context=itemgetter("question") | retriever | joined)
        | prompt
        | ContextEchoModel()
        | StrOutputParser()
    )
    return chain.with_config(run_name="rag")


class OtlpJsonLinesExporter(SpanExporter):
    """Appends each batch of spans to a file as one ExportTraceServiceRequest in the OTLP JSON encoding, a
    line each, as the OpenTelemetry collector's file exporter writes them: lowerCamelCase keys, enums as
    integers, int64 as strings, and ids as hex (protobuf's JSON mapping writes bytes as base64; OTLP/JSON
    says hex)."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
        for resource_spans in request.get("resourceSpans", []):
            for scope_spans in resource_spans.get("scopeSpans", []):
                for span in scope_spans.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
        self._file.write(json.dumps(request) + "\n")
        self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._file.close()


class CheckedExporter(SpanExporter):
    """Another exporter, remembering whether any export failed: SimpleSpanProcessor drops the result (the
    OTLP exporter only logs a refused request), and the app must exit non-zero when spans went missing.
    After a failure it tries no more: the exit status is decided, and each try would wait out the OTLP
    exporter's retries (up to its timeout) again."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.failed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self.failed:
            self.failed = self.inner.export(spans) is not SpanExportResult.SUCCESS
        return SpanExportResult.FAILURE if self.failed else SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.inner.shutdown()


def main(argv: list[str] | None = None) -> int:
    """Answers the questions, one trace each (SimpleSpanProcessor sends each span to Phoenix, and writes it
    to the file, as it ends; Phoenix stores what it was sent ~0.1 s later); 0, or 1 if an export failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", type=Path, required=True, help="a folder of .md files")
    parser.add_argument("--questions", type=Path, required=True, help="a JSON list of questions")
    parser.add_argument("--phoenix-endpoint", help="an OTLP/HTTP traces endpoint: http://HOST:PORT/v1/traces")
    parser.add_argument("--otlp-file", type=Path, help="also append the spans here, OTLP/JSON Lines")
    parser.add_argument("--project", default="ragbench-rag-app", help="the Phoenix project of the spans")
    parser.add_argument("--broken-retriever", action="store_true", help="retrieve an irrelevant file")
    args = parser.parse_args(argv)
    if not (args.phoenix_endpoint or args.otlp_file):
        parser.error("give --phoenix-endpoint, --otlp-file or both")
    files = {path.name: path.read_text(encoding="utf-8") for path in sorted(args.kb.glob("*.md"))}
    if not files:
        parser.error(f"no .md files in {args.kb}")
    questions = json.loads(args.questions.read_text(encoding="utf-8"))

    exporters = [
        CheckedExporter(inner)
        for inner in (
            OTLPSpanExporter(endpoint=args.phoenix_endpoint) if args.phoenix_endpoint else None,
            OtlpJsonLinesExporter(args.otlp_file) if args.otlp_file else None,
        )
        if inner is not None
    ]
    provider = TracerProvider(
        resource=Resource.create({PROJECT_ATTRIBUTE: args.project, "service.name": "ragbench-rag-app"})
    )
    for exporter in exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        chain = rag_chain(KeywordRetriever(files=files, broken=args.broken_retriever))
        for item in questions:
            inputs = {"question": item["question"]}
            if item.get("history"):
                inputs["history"] = item["history"]
            with capture_span_context() as capture, using_tags(item.get("tags") or []):
                chain.invoke(inputs)
                trace_id = format_trace_id(capture.get_span_contexts()[0].trace_id)
            print(f"{trace_id}\t{item['question']}", flush=True)
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    failed = [type(exporter.inner).__name__ for exporter in exporters if exporter.failed]
    if failed:
        print(f"some spans were not exported ({', '.join(failed)})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a run spent, per role, beside what its plan said it would: read from the `spend` metadata every step
that calls a model logs (`steps.spend.step_spending`), so it counts what was really sent (retries
included) whatever the cache served, and shown in the report's notes and the terminal summary."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel

from ragbench.llm.budget import PlannedSpend

# Step-id prefix -> the role the plan names (ragbench.config.dry_run, ragbench.config.pipeline_plans): the
# longest prefix wins.
ROLES = {
    "answer_": "reader",
    "judge_": "judge",
    "pairwise_": "judge",
    "judge_card_": "judge check",
    "judge_alignment_": "judge check",
    "rewrite_": "rewrite",
    "generate_eval_candidates": "generator",
    "critique_eval_candidates": "critics",
    "roundtrip_eval_candidates": "roundtrip",
    "write_training_questions": "question writer",
}
# Roles whose calls the plan lists apart (the dry run's judge card line), not in its total.
UNPLANNED_ROLES = {"judge check"}


class Tally(BaseModel):
    """Calls sent (retries included), prompt plus completion tokens, cost at litellm's prices (local
    models 0), and seconds in calls: the measure of a local model's compute."""

    calls: int = 0
    retries: int = 0  # of the calls
    tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0

    @property
    def retry_rate(self) -> float:
        """Retries per first attempt: what a plan of first attempts is multiplied by (1 + rate) for."""
        first = self.calls - self.retries
        return self.retries / first if first > 0 else 0.0

    def plus(self, other: Mapping[str, float | int]) -> Tally:
        return Tally(
            calls=self.calls + int(other.get("calls", 0)),
            retries=self.retries + int(other.get("retries", 0)),
            tokens=self.tokens + int(other.get("tokens", 0)),
            cost_usd=round(self.cost_usd + float(other.get("cost_usd", 0.0)), 6),
            seconds=round(self.seconds + float(other.get("seconds", 0.0)), 3),
        )

    def text(self) -> str:
        return (
            f"{self.calls} calls ({self.retries} retries), {self.tokens} tokens, ${self.cost_usd:.4f}, "
            f"{self.seconds:.1f} s in calls"
        )


class RunSpend(BaseModel):
    """A run's spend: per role and in all, and the plan it started with (None: started without one, e.g.
    from Python)."""

    roles: dict[str, Tally] = {}
    planned: PlannedSpend | None = None

    @property
    def total(self) -> Tally:
        return _sum(self.roles.values())

    @property
    def planned_roles(self) -> dict[str, Tally]:
        """The roles the plan counts (the judge card's calls are listed apart by the dry run)."""
        return {role: t for role, t in self.roles.items() if role not in UNPLANNED_ROLES}

    @property
    def token_share(self) -> float | None:
        """The share of its plan's token bound the run used, by the roles the plan counts (None without a
        plan, or a plan of none): the next plan's expected tokens."""
        if self.planned is None or self.planned.tokens == 0:
            return None
        return sum(t.tokens for t in self.planned_roles.values()) / self.planned.tokens

    @property
    def call_share(self) -> float | None:
        """The share of its plan's first attempts the run sent, by the roles the plan counts (None without a
        plan, or a plan of none): a race stops cells early, the LLM cache serves a prompt repeated within
        the run; the next plan's expected calls."""
        if self.planned is None or self.planned.first_attempts == 0:
            return None
        return sum(t.calls - t.retries for t in self.planned_roles.values()) / self.planned.first_attempts

    def as_metadata(self) -> dict:
        """The run's `spend` metadata: the plan, each role's and the total."""
        return self.model_dump(mode="json") | {"total": self.total.model_dump()}

    def lines(self) -> list[str]:
        """Planned against spent on the same roles (the plan's), then what the plan lists apart (the judge
        card, whose at-most the dry run prints on its own line), so the two totals compare like with like."""
        if self.planned is None:
            return [f"Spent: {_total_text(self.roles)}."]
        planned_roles = self.planned_roles
        apart = {role: t for role, t in self.roles.items() if role not in planned_roles}
        line = f"Planned: {self.planned.text()}. Spent on it: {_total_text(planned_roles)}."
        if apart:
            line += f" Besides the plan: {_total_text(apart)}."
        return [line]


def _sum(tallies: Iterable[Tally]) -> Tally:
    total = Tally()
    for tally in tallies:
        total = total.plus(tally.model_dump())
    return total


def _total_text(roles: Mapping[str, Tally]) -> str:
    """The roles' total, then each role's share when there is more than one."""
    total = _sum(roles.values())
    if len(roles) < 2:
        return " ".join([*roles, total.text()])
    return f"{total.text()} (" + "; ".join(f"{role} {t.text()}" for role, t in sorted(roles.items())) + ")"


def role_of(step_id: str) -> str:
    """The role a step's calls belong to, by its id (`other`: ingest, testset, references...)."""
    matches = [prefix for prefix in ROLES if step_id.startswith(prefix)]
    return ROLES[max(matches, key=len)] if matches else "other"


def run_spend(steps: Iterable[tuple[str, Mapping | None]], planned: Mapping | None = None) -> RunSpend:
    """The run's spend from its steps' `spend` metadata (`steps`: step id and that metadata, None for a
    step that called nothing or was served from the cache)."""
    roles: dict[str, Tally] = {}
    for step_id, spend in steps:
        if spend and spend.get("calls"):  # a step that sent nothing (all cached, or no model) adds nothing
            role = role_of(step_id)
            roles[role] = roles.get(role, Tally()).plus(spend)
    return RunSpend(roles=roles, planned=None if planned is None else PlannedSpend.model_validate(planned))

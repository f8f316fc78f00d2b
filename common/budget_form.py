"""The form of a default budget (issue 38 §2): a person's, on the settings page, and a chat
session's, on its chat page. Four optional caps and what to do at one, checked as a loop's
budget is (agentsys.research.budget.checked); every cap left empty: no default."""

from __future__ import annotations

from django import forms

from agentsys.research.budget import CAPS, ON_CAP, checked

LABELS = {
    "llm_tokens": ("Model tokens", "every kind of token its model calls pay for"),
    "llm_usd": ("Model spend (USD)", "what the provider charges"),
    "gpu_hours": ("GPU hours", "its runs' GPUs times the hours they hold them"),
    "wall_hours": ("Wall-clock hours", "since the loop started"),
}
ON_CAP_WORDS = {
    "hold_runs": "runs going on finish",
    "stop_runs": "stop its running runs",
}


class BudgetForm(forms.Form):
    llm_tokens = forms.FloatField(required=False, min_value=0)
    llm_usd = forms.FloatField(required=False, min_value=0)
    gpu_hours = forms.FloatField(required=False, min_value=0)
    wall_hours = forms.FloatField(required=False, min_value=0)
    on_cap = forms.ChoiceField(
        choices=[(value, f"{value}: {ON_CAP_WORDS[value]}") for value in ON_CAP],
        initial="hold_runs",
        label="At a cap",
        help_text="either way the loop waits for your approval",
    )

    def __init__(self, *args, budget: dict | None = None, **kwargs):
        # The saved default fills the fields; a posted form keeps what the person typed.
        kwargs.setdefault("initial", {**(budget or {})})
        super().__init__(*args, **kwargs)
        for name, (label, help_text) in LABELS.items():
            self.fields[name].label, self.fields[name].help_text = label, help_text
            self.fields[name].widget.attrs.update(step="any", placeholder="no cap")

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        raw = {name: data.get(name) for name in CAPS if data.get(name) is not None}
        try:
            self.budget = checked({**raw, "on_cap": data.get("on_cap")} if raw else {})
        except (TypeError, ValueError) as error:
            raise forms.ValidationError(str(error)) from None
        return data


def budget_words(budget: dict | None) -> str:
    """A default budget in a line: 'GPU hours 2, model spend (USD) 5; stop_runs' or 'none'."""
    caps = [f"{LABELS[name][0]} {budget[name]:g}" for name in CAPS if name in (budget or {})]
    if not caps:
        return "none"
    return f"{', '.join(caps)}; at a cap {budget.get('on_cap', 'hold_runs')}"

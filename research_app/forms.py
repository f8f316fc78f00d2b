from pathlib import Path

from django import forms
from django.conf import settings

from research_app.services import AUTONOMY_LEVELS, MAX_GOAL


class StartResearchForm(forms.Form):
    goal = forms.CharField(
        max_length=MAX_GOAL,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
        initial="Find the learning rate that gives train.py the lowest final loss",
    )
    max_iterations = forms.IntegerField(min_value=1, max_value=1000, initial=5)
    wait_seconds = forms.FloatField(min_value=0, max_value=86400, initial=5)
    autonomy_level = forms.ChoiceField(
        choices=[(a, a) for a in AUTONOMY_LEVELS], initial="balanced"
    )
    workdir = forms.CharField(max_length=1000, required=False, help_text="Empty: AGENTSYS_WORKDIR")

    def clean_workdir(self):
        workdir = self.cleaned_data["workdir"].strip() or str(settings.AGENTSYS_WORKDIR)
        if not Path(workdir).is_absolute() or not Path(workdir).is_dir():
            raise forms.ValidationError(f"{workdir} is not an existing absolute directory")
        return workdir

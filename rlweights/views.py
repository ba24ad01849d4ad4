"""Dashboard page of the rlweights engine."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from webapp.views import figure_html

from . import figures, selectors


@login_required
def dashboard(request, pk: int | None = None):
    """Learned weights, the learning curve, the weights per step and the baseline comparison
    of the newest succeeded weight-learning experiment (or experiment ``pk``)."""
    if pk is not None:
        exp = get_object_or_404(selectors.weight_learning_experiments(user=request.user), pk=pk)
    else:
        exp = selectors.latest_succeeded_weight_learning(user=request.user)
    ctx = {"experiment": exp, "experiments": selectors.weight_learning_experiments(user=request.user)[:20]}
    if exp is not None and exp.result:
        r = exp.result
        ctx.update(
            learned_weights=r.get("learned_weights", {}),
            summary=r.get("summary", {}),
            kube_yaml=r.get("kube_scheduler_configuration", ""),
            volcano_yaml=r.get("volcano_scheduler_conf", ""),
            curve_fig=figure_html(figures.learning_curve_figure(selectors.learning_curve(experiment=exp)), "rlw-curve"),
            steps_fig=figure_html(figures.weights_per_step_figure(selectors.weight_steps(experiment=exp)), "rlw-steps"),
            compare_fig=figure_html(figures.baseline_comparison_figure(r.get("summary", {})), "rlw-compare"),
        )
    return render(request, "rlweights/dashboard.html", ctx)

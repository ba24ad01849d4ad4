"""The demo's closing table (webapp.management.commands.demo.summary_table): labels are not cut
short and the verdict says it reads the ratio (engine_headlines replaced by fixed rows: the
table's layout is what is tested here; the headlines themselves are tested per engine)."""
import datetime as dt
import types

from webapp.experiments import Headline


def test_long_labels_are_whole_and_the_verdict_names_the_ratio(monkeypatch):
    from webapp import selectors
    from webapp.management.commands.demo import summary_table

    since = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    exp = types.SimpleNamespace(created_at=since + dt.timedelta(seconds=5))
    fed = Headline("federation", "expected latency per request, social-network (model)", "12.3 ms",
                   "nearest cluster", "15.0 ms", 12.3 / 15.0, "lower")
    rl = Headline(engine="rlweights", metric="mean-latency vs equal weights (PPO)", ours="-5.0 %",
                  baseline_name="random search (budget 64)", baseline="-4.9 %", ratio=0.999, better="lower")
    rows = [types.SimpleNamespace(kind=h.engine, experiment=exp, headline=h, error="") for h in (fed, rl)]
    rows.append(types.SimpleNamespace(kind="old", experiment=exp, headline=None, error="no headline for this result"))
    rows.append(types.SimpleNamespace(kind="earlier", experiment=types.SimpleNamespace(created_at=since
                                                                                       - dt.timedelta(1)),
                                      headline=fed, error=""))
    monkeypatch.setattr(selectors, "engine_headlines", lambda *, user: rows)
    text = summary_table(user=None, since=since, step_seconds={"tuning": 61.4}, total_s=70.0)
    lines = text.splitlines()
    fed_line = next(ln for ln in lines if ln.startswith("federation"))
    assert "expected latency per request, social-network (model)" in fed_line
    assert "nearest cluster 15.0 ms" in fed_line and "0.820" in fed_line
    assert fed_line.endswith("better (ratio: lower is better)")
    rl_line = next(ln for ln in lines if ln.startswith("rlweights"))
    assert rl_line.endswith("tie (ratio: lower is better)") and "-5.0 %" in rl_line
    assert any(ln.startswith("old") and "no headline for this result" in ln for ln in lines)
    assert not any(ln.startswith("earlier") for ln in lines)  # run before this demo: not its row
    # the columns line up: every row's figure column starts where the header's does
    head = next(ln for ln in lines if ln.startswith("engine"))
    col = head.index("figure")
    assert fed_line[col:].startswith("expected") and rl_line[col:].startswith("mean-latency vs equal weights")
    assert lines[-1] == "step wall times: tuning 61 s; demo total 70 s"

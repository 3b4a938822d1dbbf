"""kronos.finetune(): the fine-tuning pipeline from Python, on the tiny fixture model and a
learnable synthetic series (a few seconds): the output paths, progress events, a stop and its
resume, the GIL released while it trains, and config errors named."""

import math
import os
import threading

import numpy as np
import pandas as pd
import pytest

import kronos
from conftest import FIXTURES

TINY = os.path.join(FIXTURES, "tiny")


@pytest.fixture()
def series(tmp_path):
    """An hourly series following the hour of day, as tests/test_cli_finetune.c writes it."""
    n = 24 * 30
    i = np.arange(n)
    close = 100 + 0.02 * i + 4 * np.sin(2 * np.pi * (i % 24) / 24) + (i * 7919 % 13) * 0.05
    prev = np.concatenate([[100.0], close[:-1]])
    vol = 1000 + 400 * np.cos(2 * np.pi * (i % 24) / 24)
    df = pd.DataFrame({
        "timestamps": pd.date_range("2024-01-01", periods=n, freq="h"),
        "open": prev, "high": np.maximum(prev, close) + 0.3, "low": np.minimum(prev, close) - 0.3,
        "close": close, "volume": vol, "amount": vol * close})
    path = tmp_path / "series.csv"
    df.to_csv(path, index=False)
    return str(path)


def config(series, out):
    return {
        "data": {"data_path": series, "lookback_window": 24, "predict_window": 7},
        "training": {"batch_size": 8, "epochs": 1, "seed": 3, "log_interval": 1},
        "model_paths": {"pretrained_tokenizer": os.path.join(TINY, "tokenizer"),
                        "pretrained_predictor": os.path.join(TINY, "predictor"),
                        "base_save_path": str(out)},
        "kronos": {"threads": 1, "steps_per_epoch": 3, "val_windows": 8},
    }


def test_finetune_returns_loadable_paths_and_reports_progress(series, tmp_path):
    events = []
    paths = kronos.finetune(config(series, tmp_path / "run"), progress=events.append,
                            predictor_learning_rate=0.002)
    assert paths["base_save_path"] == str(tmp_path / "run")
    for k in ("tokenizer_best", "tokenizer_last", "predictor_best", "predictor_last"):
        assert os.path.isfile(os.path.join(paths[k], "model.safetensors")), k
    assert paths["log"].endswith("logs/finetune.jsonl")
    assert paths["steps"] == 6 and paths["tokenizer_ran"] and paths["predictor_ran"]
    assert math.isfinite(paths["predictor_best_val_loss"])
    steps = [e for e in events if e["event"] == "step"]
    assert [e["step"] for e in steps] == [1, 2, 3, 1, 2, 3]
    assert all(math.isfinite(e["loss"]) and e["tokens_per_second"] > 0 for e in steps)
    assert [e["stage"] for e in events if e["event"] == "stage_done"] == ["tokenizer",
                                                                          "predictor"]
    # The fine-tuned pair loads and forecasts.
    model = kronos.Kronos.from_pretrained(paths["predictor_best"])
    tok = kronos.KronosTokenizer.from_pretrained(paths["tokenizer_best"])
    p = kronos.KronosPredictor(model, tok, threads=1)
    df = pd.read_csv(series)
    x = df[["open", "high", "low", "close", "volume", "amount"]].iloc[:48]
    ts = pd.to_datetime(df["timestamps"])
    pred = p.predict(x, ts.iloc[:48], ts.iloc[48:52], pred_len=4, verbose=False)
    assert len(pred) == 4
    p.close()


def test_stop_then_resume(series, tmp_path):
    cfg = config(series, tmp_path / "run")
    with pytest.raises(kronos.CancelledError, match="stopped at step 2"):
        kronos.finetune(cfg, progress=lambda e: e["event"] == "step" and e["step"] == 2,
                        train_tokenizer=False)
    paths = kronos.finetune(cfg, train_tokenizer=False, resume=True)
    assert paths["steps"] == 1 and paths["predictor_ran"]


def test_runs_with_the_gil_released(series, tmp_path):
    """Another thread keeps running Python while the run trains in C (no progress callback:
    nothing in the run takes the GIL)."""
    done = threading.Event()
    result = {}

    def train():
        try:
            result["paths"] = kronos.finetune(config(series, tmp_path / "run"),
                                              train_tokenizer=False, steps_per_epoch=6)
        finally:
            done.set()

    t = threading.Thread(target=train)
    t.start()
    ticks = 0
    while not done.is_set():
        ticks += 1
    t.join()
    assert "paths" in result
    assert ticks > 1000


def test_config_errors_named(series, tmp_path):
    with pytest.raises(kronos.InvalidArgumentError, match="training.batch_sise: unknown key"):
        kronos.finetune({"training": {"batch_sise": 4}})
    with pytest.raises(kronos.InvalidArgumentError, match="trainig: unknown section"):
        kronos.finetune({"trainig": {"batch_size": 4}})
    with pytest.raises(kronos.InvalidArgumentError,
                       match="training.batch_size: wrong type: expected an integer, got the "
                             "string '8'"):
        kronos.finetune(config(series, tmp_path / "run"), batch_size="8")
    with pytest.raises(kronos.InvalidArgumentError, match="lookback: unknown finetune key"):
        kronos.finetune(config(series, tmp_path / "run"), lookback=5)
    bad = tmp_path / "bad.yaml"
    bad.write_text("data:\n  clip: [1, 2]\n")
    with pytest.raises(kronos.InvalidArgumentError, match=r"bad.yaml:2: data.clip: wrong type"):
        kronos.finetune(str(bad))
    with pytest.raises(kronos.KronosMemoryError, match="more than the 1 MB"):
        kronos.finetune(config(series, tmp_path / "run"), memory_limit_mb=1)
    from kronos.finetune import keys
    assert keys()["training.batch_size"] == "int" and keys()["data.data_path"] == "list"

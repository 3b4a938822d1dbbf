"""A script in the official API's style (the prediction example's calls: from_pretrained,
KronosPredictor(device=...), predict with keyword arguments, predict_batch with lists) runs with
only its import line pointing at this package, in a fresh interpreter."""

import subprocess
import sys
import textwrap

from conftest import DEMO, FIXTURES

SCRIPT = textwrap.dedent("""
    import pandas as pd
    from kronos import Kronos, KronosTokenizer, KronosPredictor

    tokenizer = KronosTokenizer.from_pretrained({demo!r})
    model = Kronos.from_pretrained({demo!r})
    predictor = KronosPredictor(model, tokenizer, device="cuda:0", max_context=512)

    df = pd.read_csv({csv!r})
    df['timestamps'] = pd.to_datetime(df['timestamps'])
    lookback, pred_len = 200, 24
    x_df = df.loc[:lookback - 1, ['open', 'high', 'low', 'close', 'volume', 'amount']]
    x_timestamp = df.loc[:lookback - 1, 'timestamps']
    y_timestamp = df.loc[lookback:lookback + pred_len - 1, 'timestamps']
    pred_df = predictor.predict(df=x_df, x_timestamp=x_timestamp, y_timestamp=y_timestamp,
                                pred_len=pred_len, T=1.0, top_p=0.9, sample_count=1,
                                verbose=True)
    assert list(pred_df.columns) == ['open', 'high', 'low', 'close', 'volume', 'amount']
    assert list(pred_df.index) == list(y_timestamp)

    dfs = [df.iloc[i:i + lookback][['open', 'high', 'low', 'close']] for i in (0, 300)]
    xs = [df.iloc[i:i + lookback]['timestamps'] for i in (0, 300)]
    ys = [df.iloc[i + lookback:i + lookback + pred_len]['timestamps'] for i in (0, 300)]
    preds = predictor.predict_batch(dfs, xs, ys, pred_len=pred_len, T=1.0, top_k=0,
                                    top_p=0.9, sample_count=2, verbose=False)
    print(len(preds), pred_df.shape, float(pred_df['close'].iloc[-1]) > 0)
""")


def test_official_style_script_runs():
    code = SCRIPT.format(demo=DEMO, csv=f"{FIXTURES}/regression_input.csv")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2 (24, 6) True"

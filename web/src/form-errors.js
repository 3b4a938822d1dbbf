// Which input of the Analyze form a refused request's `field` names (docs/api.md: every error
// body may carry `error.field`, and its message starts with it), so the page can show the
// message beside that input. Pure (no DOM), so tests/web/unit.test.mjs checks it.

// Request field -> input id. The server's aliases (stock_code, pred_len) and a symbol's
// interval point at the inputs that set them.
const INPUTS = {
  symbol: 'symbol',
  stock_code: 'symbol',
  symbols: 'symbol',
  interval: 'symbol',
  horizon: 'horizon',
  pred_len: 'horizon',
  paths: 'paths',
  seed: 'seed',
  calibrate: 'calibrate',
  temperature: 'temperature',
  top_p: 'top-p',
  narrative: 'narrative',
};

/**
 * The id of the input a field such as "horizon", "top_p" or "candles[17].high" belongs to, or
 * null when no input sets it. upload: the candles came from the file input (else the page
 * itself sent them, as a backtest does, and no input is at fault).
 */
export function inputForField(field, { upload = false } = {}) {
  if (typeof field !== 'string' || field === '') return null;
  const head = field.split(/[.[]/)[0];
  if (head === 'candles' || head === 'columns') return upload ? 'csv-file' : null;
  return Object.hasOwn(INPUTS, head) ? INPUTS[head] : null;
}

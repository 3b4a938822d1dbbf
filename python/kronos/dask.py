"""Many series on a Dask `distributed` cluster: kronos.dask.forecast_many.

Each worker loads the model once (a worker plugin holding a KronosPredictor, so one kr_model
and one kr_context per worker process); each task forecasts a batch of series through it. The
engine's numbers do not depend on what is batched together or on the thread count, so the
results equal, bit for bit, predict_batch on the same series in one process.

The model directories (or hub names) must resolve on every worker: on a multi-machine cluster,
a shared filesystem or the same `kronos pull` on each machine.
"""

import hashlib

from distributed import WorkerPlugin, get_worker

from .model import Kronos, KronosTokenizer
from .predictor import (KronosPredictor, _as_int, check_engine_options, check_quantiles,
                        forecast_params, fresh_seed, prepare, to_output)
from .errors import InvalidArgumentError


# Predictors this worker process has loaded (what the tests read to check "once per worker").
setups = 0


class KronosWorkerPlugin(WorkerPlugin):
    """Loads a KronosPredictor when a worker starts (or joins), frees it when it stops."""

    def __init__(self, model, tokenizer, max_context=512, clip=5, threads=None, kv_dtype=None,
                 quant=None):
        self.args = (model, tokenizer, max_context, clip, threads, kv_dtype, quant)
        self.name = "kronos-" + hashlib.sha1(repr(self.args).encode()).hexdigest()[:16]
        self.predictor = None

    def __getstate__(self):  # ship the arguments, never a loaded model
        return {"args": self.args, "name": self.name}

    def __setstate__(self, state):
        self.args, self.name, self.predictor = state["args"], state["name"], None

    def setup(self, worker=None):
        global setups
        setups += 1
        model, tokenizer, max_context, clip, threads, kv_dtype, quant = self.args
        self.predictor = KronosPredictor(Kronos.from_pretrained(model),
                                         KronosTokenizer.from_pretrained(tokenizer),
                                         max_context=max_context, clip=clip, threads=threads,
                                         kv_dtype=kv_dtype, quant=quant)

    def teardown(self, worker=None):
        if self.predictor is not None:
            self.predictor.close()
            self.predictor = None


def _registered(name, dask_scheduler=None):
    return name in dask_scheduler.worker_plugins


def _forecast_chunk(plugin_name, chunk, pred_len, kwargs, first):
    plugin = get_worker().plugins[plugin_name]
    return plugin.predictor._raw(chunk, pred_len, indices=range(first, first + len(chunk)),
                                 **kwargs)


def _register(client, plugin):
    """Registers the plugin unless the scheduler has it. Registering again would make every
    worker reload: only the first call (per model and settings) registers; workers that join
    later get it from the scheduler. A setup that failed on a worker is unregistered again, so
    that the scheduler does not hand a broken plugin to later workers (nor a later call take it
    for a loaded one)."""
    if client.run_on_scheduler(_registered, plugin.name):
        return
    try:
        client.register_worker_plugin(plugin, name=plugin.name)
    except BaseException:
        try:
            client.unregister_worker_plugin(plugin.name)
        except Exception:  # noqa: BLE001 -- the setup's error is the one to report
            pass
        raise


def _path(x, cls):
    if isinstance(x, cls):
        return x.path
    return cls.from_pretrained(x).path


def forecast_many(client, df_list, x_timestamp_list, y_timestamp_list, pred_len, *, model,
                  tokenizer, batch_size=32, max_context=512, clip=5, T=1.0, top_k=0, top_p=0.9,
                  sample_count=1, seed=None, return_paths=False, quantiles=None, window="exact",
                  threads=None, kv_dtype=None, quant=None):
    """predict_batch over a distributed.Client's workers, `batch_size` series per task.

    model / tokenizer: Kronos / KronosTokenizer objects, directories or hub names (resolved
    here and again on each worker). The inputs are checked here, by predict_batch's rules,
    before anything is sent; x_timestamp_list / y_timestamp_list entries may be None as in
    predict. threads is per worker (default: all the machine's CPUs, so set it to
    cores / workers per machine). Returns what predict_batch returns, in input order. seed
    None draws one seed here for the whole call, as predict_batch does.
    """
    seqs = (list, tuple)
    if not isinstance(df_list, seqs) or not isinstance(x_timestamp_list, seqs) or \
            not isinstance(y_timestamp_list, seqs):
        raise InvalidArgumentError(
            "df_list, x_timestamp_list, y_timestamp_list must be list or tuple types.")
    if not len(df_list) == len(x_timestamp_list) == len(y_timestamp_list):
        raise InvalidArgumentError(
            "df_list, x_timestamp_list, y_timestamp_list must have consistent lengths.")
    batch_size = _as_int("batch_size", batch_size, 1)
    # Every parameter as predict_batch checks it, here rather than on the workers.
    forecast_params(pred_len, T, top_k, top_p, sample_count, seed, window, max_context, clip)
    check_engine_options(threads, kv_dtype, quant)
    qs = check_quantiles(quantiles)
    pred_len = _as_int("pred_len", pred_len, 1)
    prepared = [prepare(d, x, y, pred_len, index=i)
                for i, (d, x, y) in enumerate(zip(df_list, x_timestamp_list, y_timestamp_list))]
    plugin = KronosWorkerPlugin(_path(model, Kronos), _path(tokenizer, KronosTokenizer),
                                max_context, clip, threads, kv_dtype, quant)
    if not prepared:
        return []
    _register(client, plugin)
    if seed is None:  # one seed for every chunk: the numbers of one predict_batch call
        seed = fresh_seed()
    kwargs = dict(T=T, top_k=top_k, top_p=top_p, sample_count=sample_count, seed=seed,
                  return_paths=return_paths, quantiles=qs, window=window)
    futures = []
    for start in range(0, len(prepared), batch_size):
        # The output index stays here: tasks carry only the arrays the engine reads.
        chunk = [type(p)(p.values, p.ts, p.future, None)
                 for p in prepared[start:start + batch_size]]
        futures.append(client.submit(_forecast_chunk, plugin.name, chunk, pred_len, kwargs,
                                     start, pure=False))
    raw = [r for chunk in client.gather(futures) for r in chunk]
    return [to_output(r, p.index, return_paths, qs) for p, r in zip(prepared, raw)]

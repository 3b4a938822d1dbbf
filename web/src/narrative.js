// The language-model narrative of a report (docs/report.md `narrative`, `narrative_error`):
// whether the server can write one (GET /v1/models' `narrative`, docs/api.md) and what the
// page shows for a report. Pure (no DOM), so tests/web/unit.test.mjs checks it. The page puts
// every string from here into the DOM as text, never as HTML: the prose is a model's output.

/**
 * What GET /v1/models says about narratives: {available, model}. A server without a language
 * model (`"narrative": null`), and an older one that does not say (no key), offer none.
 */
export function narrativeOffer(models) {
  const n = models && typeof models === 'object' ? models.narrative : null;
  const model = n && typeof n === 'object' && typeof n.model === 'string' && n.model.trim() ? n.model.trim() : null;
  return { available: model !== null, model };
}

/**
 * The narrative panel of one report: null when none was asked for (both keys null or absent),
 * else {kind: 'text', model, title, text, warning, note} or {kind: 'error', model, title, text}
 * (the model timed out, errored or was not reachable: the figures are still whole).
 * `asked`: the model name the page asked with (for the failure's title when the report has
 * no narrative object to name it).
 */
export function narrativeView(report, asked = null) {
  const n = report ? report.narrative : null;
  const why = report ? report.narrative_error : null;
  if (n && typeof n === 'object' && typeof n.text === 'string') {
    const model = n.model || asked || 'a language model';
    return {
      kind: 'text',
      model,
      title: `Narrative · written by a language model (${model})`,
      text: n.text,
      warning: n.warning ? `Check it against the figures: ${n.warning}.` : null,
      note: `Prose written by ${model} from the figures above. The numbers come from kronos's ` +
        'sampled paths, not from the language model; where they differ, the figures are right.',
    };
  }
  if (typeof why === 'string' && why) {
    const model = asked || 'the language model';
    return {
      kind: 'error',
      model,
      title: `Narrative · ${model} gave none`,
      text: `No narrative for this report: ${why}. The figures above are complete; only the prose is missing.`,
    };
  }
  return null;
}

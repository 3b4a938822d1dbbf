/*
 * analyst/narrative — optional prose about a report, written by a language model behind an
 * Ollama-compatible `/api/generate` endpoint (`kronos analyze --llm-url`), shown beside the
 * deterministic summary, never instead of it.
 *
 * The model sees only the report's own figures: a compact JSON of the key numbers plus the
 * summary sentences, with instructions to rewrite the summary in plain prose, add no number
 * and give no advice. Nothing it returns flows back into the report's numbers; the narrative
 * is one more piece of text, labelled as the model's. A cheap guard compares the numeric
 * tokens of the answer with those of the data it was given and flags a narrative that quotes
 * figures it was not given. A failed request (no server, timeout, HTTP error, unreadable
 * answer) is recorded in the narrative and never fails the analysis.
 *
 * A batch gets one narrative per symbol (each report's own figures, so every narrative can
 * be checked against one small set of numbers).
 */
#ifndef KR_ANALYST_NARRATIVE_H
#define KR_ANALYST_NARRATIVE_H

#include <stddef.h>

#include "analyst/analyze.h"
#include "analyst/report.h"
#include "kronos.h"
#include "kronos/analyst.h"

/* Parameters, kr_narrative and the calls for a whole set are public: kronos/analyst.h. */

/* An answer larger than this is refused: a narrative is a paragraph or two. */
#define KR_NARRATIVE_MAX_ANSWER ((size_t)4 << 20)

/* Less time than this left of a budget (kr_narrative_params.budget_s) is too little for a
 * request: the report is not asked for. */
#define KR_NARRATIVE_MIN_TIMEOUT 0.05

/* The data the model is given: compact JSON of r's key figures (formatted as the report
 * prints them) and its summary sentences. Caller frees *out. */
kr_status kr_narrative_facts(const kr_report *r, char **out, kr_error *err);

/* The whole prompt: instructions (which contain no digits) followed by the facts. Caller
 * frees *out. */
kr_status kr_narrative_prompt(const kr_report *r, char **out, kr_error *err);

/* The request body: {"model", "prompt", "stream": false, "options": {"temperature": 0}}.
 * Caller frees *out. */
kr_status kr_narrative_request_body(const char *model, const char *prompt, char **out,
                                    kr_error *err);

/* The text of an /api/generate answer of len bytes: one JSON object, or NDJSON (one object
 * per line, as a server that streams despite "stream": false sends) whose "response" pieces
 * are joined. KR_ERR_FORMAT with the reason when the answer is not such JSON, carries an
 * "error", ends with "done": false, or has no text. Caller frees *text. */
kr_status kr_narrative_parse_answer(const char *body, size_t len, char **text, kr_error *err);

/* The guard: the number of numeric tokens of text that are not a figure of data, where a
 * token matches a figure it equals after rounding the figure to the token's decimals
 * ("56%" matches 56.25, "207.6" matches 207.57), signs ignored and "2,913" read as 2913.
 * When data is JSON its figures are the numbers of its values (numbers, and numbers within
 * strings), never of its keys. The first unmatched token is copied to first (may be NULL).
 * Numbers spelt in words are not checked. -1 when out of memory. */
int kr_narrative_unsupported_figures(const char *text, const char *data, char *first, size_t cap);

/* Asks the model for r's narrative. KR_OK whenever *out was made, whether or not the
 * request worked: look at (*out)->text, ->status and ->error. Negative only for bad
 * arguments or out of memory. Caller owns *out; free with kr_narrative_free. */
kr_status kr_narrative_generate(const kr_report *r, const kr_narrative_params *p,
                                kr_narrative **out, kr_error *err);

void kr_narrative_free(kr_narrative *n);

#endif

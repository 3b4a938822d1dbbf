/*
 * finetune/config_yaml — kr_finetune_config_load_yaml: the official finetune_csv YAML config
 * read with Debian's libyaml (yaml-0.1). The file is a mapping of sections, each a mapping of
 * keys to scalars (a list of scalars for a list key); every key goes through the same setter
 * as a flag or a Python value (config.c), so types and ranges are checked in one place.
 * Quoted scalars are strings, as PyYAML reads them: `batch_size: "32"` is the wrong type.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "finetune/config.h"

/* Config files are a few kB; a bound keeps a hostile file from taking the parser's time. */
#define KR_YAML_MAX_BYTES (1 << 20)

/* A quoted or block scalar is a string. (The document loader gives plain scalars the default
 * str tag, so an explicit !!str cannot be told from none: it reads as plain.) */
static int is_quoted(const yaml_node_t *n) {
    return n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
           n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ||
           n->data.scalar.style == YAML_LITERAL_SCALAR_STYLE ||
           n->data.scalar.style == YAML_FOLDED_SCALAR_STYLE;
}

static const char *scalar(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

/* Adds "path:line: " in front of a setter's message (which starts with the key). */
static kr_status at_line(kr_status st, const char *path, const yaml_node_t *n, kr_error *err) {
    if (st != KR_OK) kr_error_prefix(err, "%s:%lu", path, (unsigned long)n->start_mark.line + 1);
    return st;
}

static kr_status set_key(kr_finetune_config *cfg, yaml_document_t *doc, const char *path,
                         const char *key, yaml_node_t *v, kr_error *err) {
    if (v->type == YAML_SCALAR_NODE) {
        kr_status st = is_quoted(v) ? kr_finetune_config_set_string(cfg, key, scalar(v), err)
                                    : kr_finetune_config_set(cfg, key, scalar(v), err);
        return at_line(st, path, v, err);
    }
    if (v->type == YAML_SEQUENCE_NODE) {
        const kr_finetune_key *k = kr_finetune_key_at(kr_ft_key_index(key));
        if (strcmp(k->type, "list"))
            return at_line(kr_error_set(err, KR_ERR_INVALID_ARG,
                                        "%s: wrong type: expected %s, got a list", key,
                                        !strcmp(k->type, "bool")     ? "true or false"
                                        : !strcmp(k->type, "string") ? "a string"
                                        : !strcmp(k->type, "int")    ? "an integer"
                                                                     : "a number"),
                           path, v, err);
        kr_status st = kr_finetune_config_set(cfg, key, "", err); /* replace, not append */
        for (yaml_node_item_t *it = v->data.sequence.items.start;
             st == KR_OK && it < v->data.sequence.items.top; it++) {
            yaml_node_t *item = yaml_document_get_node(doc, *it);
            if (!item || item->type != YAML_SCALAR_NODE)
                return at_line(kr_error_set(err, KR_ERR_INVALID_ARG,
                                            "%s: wrong type: list items must be strings", key),
                               path, item ? item : v, err);
            st = at_line(kr_finetune_config_add(cfg, key, scalar(item), err), path, item, err);
        }
        return st;
    }
    return at_line(kr_error_set(err, KR_ERR_INVALID_ARG,
                                "%s: wrong type: expected a value, got a mapping", key),
                   path, v, err);
}

static kr_status load_doc(kr_finetune_config *cfg, yaml_document_t *doc, const char *path,
                          kr_error *err) {
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root) return kr_error_set(err, KR_ERR_FORMAT, "%s: empty config", path);
    if (root->type != YAML_MAPPING_NODE)
        return kr_error_set(err, KR_ERR_FORMAT, "%s:%lu: the config must be a mapping of sections",
                            path, (unsigned long)root->start_mark.line + 1);
    char seen_sections[16][64];
    int n_seen = 0;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *sk = yaml_document_get_node(doc, p->key);
        yaml_node_t *sv = yaml_document_get_node(doc, p->value);
        if (!sk || !sv || sk->type != YAML_SCALAR_NODE)
            return kr_error_set(err, KR_ERR_FORMAT, "%s: a section name must be a string", path);
        const char *section = scalar(sk);
        int known = 0;
        size_t sl = strlen(section);
        for (int i = 0; i < kr_finetune_n_keys(); i++) {
            const char *k = kr_finetune_key_at(i)->key;
            if (!strncmp(k, section, sl) && k[sl] == '.') known = 1;
        }
        if (!known)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "%s:%lu: %s: unknown section", path,
                                (unsigned long)sk->start_mark.line + 1, section);
        for (int i = 0; i < n_seen; i++)
            if (!strcmp(seen_sections[i], section))
                return kr_error_set(err, KR_ERR_INVALID_ARG, "%s:%lu: %s: duplicate section", path,
                                    (unsigned long)sk->start_mark.line + 1, section);
        if (n_seen < 16) snprintf(seen_sections[n_seen++], sizeof seen_sections[0], "%s", section);
        /* "device:" with nothing under it is an empty section (null). */
        if (sv->type == YAML_SCALAR_NODE && !is_quoted(sv) &&
            (!*scalar(sv) || !strcmp(scalar(sv), "~") || !strcmp(scalar(sv), "null")))
            continue;
        if (sv->type != YAML_MAPPING_NODE)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "%s:%lu: %s: a section must be a mapping of keys", path,
                                (unsigned long)sv->start_mark.line + 1, section);
        for (yaml_node_pair_t *q = sv->data.mapping.pairs.start; q < sv->data.mapping.pairs.top;
             q++) {
            yaml_node_t *kk = yaml_document_get_node(doc, q->key);
            yaml_node_t *kv = yaml_document_get_node(doc, q->value);
            if (!kk || !kv || kk->type != YAML_SCALAR_NODE)
                return kr_error_set(err, KR_ERR_FORMAT, "%s: %s: a key must be a string", path,
                                    section);
            char key[256];
            if (snprintf(key, sizeof key, "%s.%s", section, scalar(kk)) >= (int)sizeof key)
                return kr_error_set(err, KR_ERR_INVALID_ARG, "%s:%lu: %s: key too long", path,
                                    (unsigned long)kk->start_mark.line + 1, section);
            for (yaml_node_pair_t *r = sv->data.mapping.pairs.start; r < q; r++) {
                yaml_node_t *prev = yaml_document_get_node(doc, r->key);
                if (prev && prev->type == YAML_SCALAR_NODE && !strcmp(scalar(prev), scalar(kk)))
                    return kr_error_set(err, KR_ERR_INVALID_ARG, "%s:%lu: %s: duplicate key", path,
                                        (unsigned long)kk->start_mark.line + 1, key);
            }
            if (kr_ft_key_index(key) < 0)
                return kr_error_set(err, KR_ERR_INVALID_ARG, "%s:%lu: %s: unknown key", path,
                                    (unsigned long)kk->start_mark.line + 1, key);
            kr_status st = set_key(cfg, doc, path, key, kv, err);
            if (st != KR_OK) return st;
        }
    }
    return KR_OK;
}

kr_status kr_ft_config_parse_yaml(kr_finetune_config *cfg, const char *text, size_t len,
                                  const char *label, kr_error *err) {
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory for the YAML parser", label);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    kr_status st;
    if (!yaml_parser_load(&parser, &doc)) {
        st = kr_error_set(err, KR_ERR_FORMAT, "%s:%lu: not valid YAML: %s%s%s", label,
                          (unsigned long)parser.problem_mark.line + 1,
                          parser.problem ? parser.problem : "parse error",
                          parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return st;
    }
    st = load_doc(cfg, &doc, label, err);
    /* PyYAML's safe_load refuses a second document ("---"); so does this. */
    if (st == KR_OK) {
        yaml_document_t extra;
        if (yaml_parser_load(&parser, &extra)) {
            if (yaml_document_get_root_node(&extra))
                st = kr_error_set(err, KR_ERR_FORMAT,
                                  "%s: more than one YAML document (---): one config per file",
                                  label);
            yaml_document_delete(&extra);
        } else
            st = kr_error_set(err, KR_ERR_FORMAT, "%s:%lu: not valid YAML: %s", label,
                              (unsigned long)parser.problem_mark.line + 1,
                              parser.problem ? parser.problem : "parse error");
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return st;
}

kr_status kr_finetune_config_load_yaml(kr_finetune_config *cfg, const char *path, kr_error *err) {
    if (!cfg || !path)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "finetune config: NULL argument");
    char *text = NULL;
    size_t len = 0;
    kr_status st = kr_read_file(path, KR_YAML_MAX_BYTES, "config", &text, &len, err);
    if (st != KR_OK) return st;
    st = kr_ft_config_parse_yaml(cfg, text, len, path, err);
    free(text);
    return st;
}

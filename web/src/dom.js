// The two DOM helpers every part of the page uses.

/** The element with this id. */
export const $ = (id) => document.getElementById(id);

/** A new element: attrs are properties, except class, data-* and aria-* (attributes);
 *  null and undefined children are left out. */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-') || k.startsWith('aria-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// Server-Sent Events read from a fetch() body: EventSource cannot POST or send the
// Authorization header, so the page reads the stream itself. The parser follows the
// text/event-stream rules of the HTML standard: lines end in LF, CRLF or CR (a CR at the end
// of one chunk and the LF at the start of the next are one line end); a line starting with ':'
// is a comment (the server's ": keep-alive"); "event", "data" (several join with "\n"), "id"
// and "retry" fields, one optional space after the colon; a blank line dispatches the event,
// and an event without data is dropped. Pure (no DOM, no fetch), so tests/web/unit.test.mjs
// feeds it chunks split anywhere.

export class SseParser {
  constructor() {
    this.buf = ''; // text after the last complete line
    this.lastWasCr = false; // the previous chunk ended in CR: a leading LF here is its pair
    this.first = true; // a byte order mark may open the stream
    this.reset();
    this.comments = 0; // comment lines seen (keep-alives)
  }

  reset() {
    this.event = '';
    this.data = [];
    this.id = null;
  }

  /** Feeds decoded text; returns the events it completed: [{event, data, id}]. */
  push(text) {
    let s = String(text);
    if (s === '') return [];
    if (this.first) {
      if (s.charCodeAt(0) === 0xfeff) s = s.slice(1);
      this.first = false;
    }
    if (this.lastWasCr && s.startsWith('\n')) s = s.slice(1);
    this.lastWasCr = false;
    const out = [];
    let start = 0;
    const all = this.buf + s;
    const offset = this.buf.length;
    this.buf = '';
    for (let i = offset; i < all.length; i++) {
      const c = all.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.line(all.slice(start, i), out);
      if (c === 13) {
        if (i + 1 < all.length) {
          if (all.charCodeAt(i + 1) === 10) i++;
        } else {
          this.lastWasCr = true;
        }
      }
      start = i + 1;
    }
    this.buf = all.slice(start);
    return out;
  }

  /** The stream ended: an event not closed by a blank line is dropped (the standard's rule). */
  end() {
    this.buf = '';
    this.reset();
    return [];
  }

  line(text, out) {
    if (text === '') {
      if (this.data.length) out.push({ event: this.event || 'message', data: this.data.join('\n'), id: this.id });
      this.reset();
      return;
    }
    if (text.startsWith(':')) {
      this.comments++;
      return;
    }
    const colon = text.indexOf(':');
    const name = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (name === 'event') this.event = value;
    else if (name === 'data') this.data.push(value);
    else if (name === 'id' && !value.includes('\0')) this.id = value;
    // "retry" and unknown fields: nothing the page needs.
  }
}

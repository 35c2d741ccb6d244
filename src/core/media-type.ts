/**
 * RFC 9110 §8.3.1 media types, as a worker may name its result's content
 * type: `type "/" subtype *( OWS ";" OWS [ name "=" ( token / quoted-string ) ] )`,
 * in ASCII. Anything else could not be sent back as a header (a control
 * character made every read of the result fail) or could smuggle a second
 * header value, so it is refused when the result is stored and never served
 * as a content type when it is read.
 *
 * A scanner rather than one regular expression: the grammar's optional
 * whitespace around optional parameters makes a backtracking regex
 * exponential on a run of `" ; "`.
 */

export const MAX_MEDIA_TYPE_LENGTH = 255;

const TCHAR = /^[!#$%&'*+.^_`|~0-9A-Za-z-]$/;

function isTchar(c: string | undefined): boolean {
  return c !== undefined && TCHAR.test(c);
}

export function isMediaType(value: string): boolean {
  if (value.length > MAX_MEDIA_TYPE_LENGTH) return false;
  let i = 0;
  const token = (): boolean => {
    const start = i;
    while (isTchar(value[i])) i += 1;
    return i > start;
  };
  const ows = (): void => {
    while (value[i] === ' ' || value[i] === '\t') i += 1;
  };
  if (!token() || value[i] !== '/') return false;
  i += 1;
  if (!token()) return false;
  for (;;) {
    ows();
    if (i === value.length) return true;
    if (value[i] !== ';') return false;
    i += 1;
    ows();
    if (i === value.length || value[i] === ';') continue;
    if (!token() || value[i] !== '=') return false;
    i += 1;
    if (value[i] === '"') {
      i += 1;
      for (;;) {
        const c = value.charCodeAt(i);
        if (Number.isNaN(c)) return false;
        if (c === 0x22) break;
        if (c === 0x5c) {
          const next = value.charCodeAt(i + 1);
          if (!(next === 0x09 || (next >= 0x20 && next <= 0x7e))) return false;
          i += 2;
          continue;
        }
        if (!(c === 0x09 || c === 0x20 || c === 0x21 || (c >= 0x23 && c <= 0x7e))) return false;
        i += 1;
      }
      i += 1;
    } else if (!token()) return false;
  }
}

/** The lowercased `type/subtype`, without parameters. */
export function essenceOf(mediaType: string): string {
  return (mediaType.split(';', 1)[0] ?? '').trim().toLowerCase();
}

/**
 * Says where JSON text stops being JSON, from the engine's own parse error:
 * the reason without the echoed input, and the line, column and offset when
 * the engine names one. Used for request bodies and for the CLI's --payload
 * and kind files, so that a typo can be found without guessing.
 */

export function describeJsonError(text: string, error: unknown): string {
  const raw = error instanceof Error ? error.message : String(error);
  if (/unexpected end of json input/i.test(raw)) return `the text ends before the JSON value is complete (at ${locate(text, text.length)})`;
  // V8 sometimes quotes the input after the reason ('Unexpected token 'a', "abc" is not valid JSON'): keep the reason only.
  const reason = (raw.split(/, ".*" is not valid JSON$/s, 1)[0] ?? raw).replace(/ in JSON at position \d+.*$/s, '').trim();
  const position = /at position (\d+)/.exec(raw)?.[1];
  return position === undefined ? reason : `${reason} at ${locate(text, Number(position))}`;
}

function locate(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - before.lastIndexOf('\n');
  return `line ${line}, column ${column} (position ${offset})`;
}

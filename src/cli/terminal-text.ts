/**
 * Text from the network printed on an operator's terminal: worker ids, kinds,
 * error codes and messages come from workers and producers, and a raw ESC or
 * CSI sequence in them can retitle the terminal, hide lines or forge output.
 * Every C0 and C1 control character, DEL, and the Unicode line separators and
 * bidirectional overrides are shown as escapes (`\x1b`, `\u202e`) instead.
 */

const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
/** What JSON.stringify leaves raw in strings (it escapes C0 itself; the C0 left are its own line breaks). */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function escapeOne(char: string): string {
  const code = char.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** One printable line: untrusted text with every control character escaped. */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, escapeOne);
}

/**
 * JSON for a terminal: JSON.stringify already escapes C0 characters; the rest
 * (DEL, C1, separators, bidi) become `\uXXXX`, which is still the same JSON.
 */
export function terminalSafeJson(value: unknown, indent = 2): string {
  return JSON.stringify(value, null, indent).replace(UNSAFE_IN_JSON, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

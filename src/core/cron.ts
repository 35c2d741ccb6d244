/**
 * Recurring schedules, as pure code: a five-field cron expression (minute,
 * hour, day of month, month, day of week) or one of the @-names, read in an
 * IANA time zone, and the instants it names.
 *
 * Fields take `*`, numbers, ranges `a-b`, lists `a,b`, steps `*\/n`, `a-b/n`
 * and `a/n` (from a to the field's maximum), and the names JAN–DEC and
 * SUN–SAT (day of week 0–7, both 0 and 7 Sunday). As in Vixie cron, when both
 * day fields are restricted (neither starts with `*`) a day matches when
 * either matches; otherwise both must.
 *
 * Occurrences are local wall-clock times. The zone's offsets come from
 * Intl.DateTimeFormat. A local time that a daylight-saving change skips runs
 * once, at the first instant after the gap (02:30 on a spring-forward night
 * runs at 03:00); a local time that a change repeats runs once, at its first
 * instant. Several skipped times fold into the one instant after the gap.
 * The mapping from local times to instants is monotone, which is what lets
 * nextOccurrence and previousOccurrence walk local time and check the instant.
 */

export interface CronExpression {
  /** The text as given, trimmed. */
  readonly source: string;
  readonly minutes: readonly boolean[];
  readonly hours: readonly boolean[];
  readonly daysOfMonth: readonly boolean[];
  readonly months: readonly boolean[];
  /** 0 = Sunday … 6 = Saturday (7 is folded into 0). */
  readonly daysOfWeek: readonly boolean[];
  readonly dayOfMonthRestricted: boolean;
  readonly dayOfWeekRestricted: boolean;
}

export type CronParse = { readonly ok: true; readonly cron: CronExpression } | { readonly ok: false; readonly message: string };

export const CRON_NAMES: Readonly<Record<string, string>> = Object.freeze({
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
});

interface FieldSpec {
  readonly label: string;
  readonly min: number;
  readonly max: number;
  readonly names?: readonly string[];
  /** The first name's value (JAN = 1, SUN = 0). */
  readonly nameBase?: number;
}

const FIELDS: readonly FieldSpec[] = [
  { label: 'minute', min: 0, max: 59 },
  { label: 'hour', min: 0, max: 23 },
  { label: 'day of month', min: 1, max: 31 },
  { label: 'month', min: 1, max: 12, names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'], nameBase: 1 },
  { label: 'day of week', min: 0, max: 7, names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'], nameBase: 0 },
];

/** The longest text parseCron reads. */
export const CRON_MAX_LENGTH = 200;

function parseValue(text: string, field: FieldSpec): number | null {
  if (/^\d{1,2}$/.test(text)) {
    const value = Number(text);
    return value >= field.min && value <= field.max ? value : null;
  }
  const index = field.names?.indexOf(text.toUpperCase()) ?? -1;
  return index < 0 ? null : index + (field.nameBase ?? 0);
}

function parseField(text: string, field: FieldSpec): boolean[] | string {
  const set: boolean[] = Array.from({ length: field.max + 1 }, () => false);
  for (const part of text.split(',')) {
    const [range = '', stepText, extra] = part.split('/');
    if (extra !== undefined) return `the ${field.label} field "${text}" has more than one "/"`;
    let step = 1;
    if (stepText !== undefined) {
      if (!/^\d{1,2}$/.test(stepText) || Number(stepText) < 1 || Number(stepText) > field.max) {
        return `the ${field.label} field "${text}" has a step that is not a number from 1 to ${field.max}`;
      }
      step = Number(stepText);
    }
    let low: number;
    let high: number;
    if (range === '*') {
      low = field.min;
      high = field.max;
    } else {
      const bounds = range.split('-');
      if (bounds.length > 2) return `the ${field.label} field "${text}" has a range with more than one "-"`;
      const first = parseValue(bounds[0] ?? '', field);
      const last = bounds.length === 2 ? parseValue(bounds[1] ?? '', field) : first;
      if (first === null || last === null)
        return `the ${field.label} field "${text}" must hold values from ${field.min} to ${field.max}${field.names === undefined ? '' : ' or names'}`;
      if (last < first) return `the ${field.label} field "${text}" has a range that ends before it starts`;
      low = first;
      // "5/15" means 5 to the maximum in steps of 15.
      high = bounds.length === 1 && stepText !== undefined ? field.max : last;
    }
    for (let value = low; value <= high; value += step) set[value] = true;
  }
  return set;
}

/** Parses five-field cron text or an @-name; the message names what is wrong. */
export function parseCron(text: string): CronParse {
  const source = text.trim();
  if (source.length === 0) return { ok: false, message: 'the cron expression is empty' };
  if (source.length > CRON_MAX_LENGTH) return { ok: false, message: `the cron expression is longer than ${CRON_MAX_LENGTH} characters` };
  const expanded = source.startsWith('@') ? CRON_NAMES[source.toLowerCase()] : source;
  if (expanded === undefined) return { ok: false, message: `"${source}" is not one of ${Object.keys(CRON_NAMES).join(', ')}` };
  const parts = expanded.split(/\s+/);
  if (parts.length !== 5)
    return { ok: false, message: `a cron expression has five fields (minute hour day-of-month month day-of-week); "${source}" has ${parts.length}` };
  const sets: boolean[][] = [];
  for (const [i, field] of FIELDS.entries()) {
    const parsed = parseField(parts[i] ?? '', field);
    if (typeof parsed === 'string') return { ok: false, message: parsed };
    sets.push(parsed);
  }
  const [minutes = [], hours = [], daysOfMonth = [], months = [], daysOfWeek = []] = sets;
  if (daysOfWeek[7] === true) daysOfWeek[0] = true;
  daysOfWeek.length = 7;
  return {
    ok: true,
    cron: {
      source,
      minutes,
      hours,
      daysOfMonth,
      months,
      daysOfWeek,
      dayOfMonthRestricted: !(parts[2] ?? '').startsWith('*'),
      dayOfWeekRestricted: !(parts[4] ?? '').startsWith('*'),
    },
  };
}

// --- time zones ---------------------------------------------------------------

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let format = formatters.get(zone);
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, format);
  }
  return format;
}

/** The zone's canonical IANA name, or null when Intl does not know it. */
export function canonicalTimeZone(zone: string): string | null {
  if (zone.length === 0 || zone.length > 64 || !/^[A-Za-z0-9_+\-/]+$/.test(zone)) return null;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Local wall-clock time minus UTC at `instant`, in ms (whole seconds). */
export function zoneOffset(zone: string, instant: number): number {
  const fields: Record<string, number> = {};
  for (const part of formatter(zone).formatToParts(new Date(instant))) {
    if (part.type !== 'literal') fields[part.type] = Number(part.value);
  }
  const local = Date.UTC(
    fields['year'] ?? 1970,
    (fields['month'] ?? 1) - 1,
    fields['day'] ?? 1,
    fields['hour'] ?? 0,
    fields['minute'] ?? 0,
    fields['second'] ?? 0,
  );
  const utc = new Date(instant);
  utc.setUTCMilliseconds(0);
  // Date.UTC maps years 0–99 to 1900–1999; every instant we handle is far from those.
  return local - utc.getTime();
}

/**
 * The instant of local wall-clock time `local` (ms of a UTC-reckoned naive
 * time): its first instant when the zone repeats it, the first instant after
 * the gap when the zone skips it.
 */
export function localToInstant(zone: string, local: number): number {
  const before = zoneOffset(zone, local - DAY);
  const after = zoneOffset(zone, local + DAY);
  const candidates = new Set([before, zoneOffset(zone, local), after]);
  let best: number | null = null;
  for (const offset of candidates) {
    const instant = local - offset;
    if (zoneOffset(zone, instant) === offset && (best === null || instant < best)) best = instant;
  }
  if (best !== null) return best;
  // In a gap: the transition lies between local - after (still the old offset) and local - before (the new one).
  let low = local - Math.max(before, after);
  let high = local - Math.min(before, after);
  const lowOffset = zoneOffset(zone, low);
  while (high - low > 1000) {
    const middle = low + Math.floor((high - low) / 2000) * 1000;
    if (zoneOffset(zone, middle) === lowOffset) low = middle;
    else high = middle;
  }
  return high;
}

// --- matching local times -----------------------------------------------------

function dayMatches(cron: CronExpression, date: Date): boolean {
  const dom = cron.daysOfMonth[date.getUTCDate()] === true;
  const dow = cron.daysOfWeek[date.getUTCDay()] === true;
  if (cron.dayOfMonthRestricted && cron.dayOfWeekRestricted) return dom || dow;
  return dom && dow;
}

/** How far from its start nextMatch and previousMatch look before answering "never". */
const SEARCH_SPAN = 8 * 366 * DAY;

/** The first local minute at or after `local` that the expression names; null when none within eight years. */
export function nextMatch(cron: CronExpression, local: number): number | null {
  let at = Math.ceil(local / MINUTE) * MINUTE;
  const limit = at + SEARCH_SPAN;
  while (at <= limit) {
    const d = new Date(at);
    const year = d.getUTCFullYear();
    const month = d.getUTCMonth();
    const day = d.getUTCDate();
    const hour = d.getUTCHours();
    if (cron.months[month + 1] !== true) at = Date.UTC(year, month + 1, 1);
    else if (!dayMatches(cron, d)) at = Date.UTC(year, month, day + 1);
    else if (cron.hours[hour] !== true) at = Date.UTC(year, month, day, hour + 1);
    else if (cron.minutes[d.getUTCMinutes()] !== true) at += MINUTE;
    else return at;
  }
  return null;
}

/** The last local minute at or before `local` that the expression names; null when none within eight years. */
export function previousMatch(cron: CronExpression, local: number): number | null {
  let at = Math.floor(local / MINUTE) * MINUTE;
  const limit = at - SEARCH_SPAN;
  while (at >= limit) {
    const d = new Date(at);
    const year = d.getUTCFullYear();
    const month = d.getUTCMonth();
    const day = d.getUTCDate();
    const hour = d.getUTCHours();
    if (cron.months[month + 1] !== true) at = Date.UTC(year, month, 1) - MINUTE;
    else if (!dayMatches(cron, d)) at = Date.UTC(year, month, day) - MINUTE;
    else if (cron.hours[hour] !== true) at = Date.UTC(year, month, day, hour) - MINUTE;
    else if (cron.minutes[d.getUTCMinutes()] !== true) at -= MINUTE;
    else return at;
  }
  return null;
}

/** The largest shift of a zone's offset at one transition we allow for (real ones are at most two hours). */
const MAX_SHIFT = 3 * HOUR;

/** The first occurrence strictly after `after`; null when none within eight years. */
export function nextOccurrence(cron: CronExpression, zone: string, after: number): number | null {
  let local: number | null = Math.floor((after + zoneOffset(zone, after)) / MINUTE) * MINUTE;
  for (;;) {
    local = nextMatch(cron, local);
    if (local === null) return null;
    const instant = localToInstant(zone, local);
    if (instant > after) return instant;
    local += MINUTE;
  }
}

/** The last occurrence at or before `atOrBefore`; null when none within eight years. */
export function previousOccurrence(cron: CronExpression, zone: string, atOrBefore: number): number | null {
  // A repeated hour: local times after the instant's own may still map to earlier instants.
  let local: number | null = Math.floor((atOrBefore + zoneOffset(zone, atOrBefore)) / MINUTE) * MINUTE + MAX_SHIFT;
  for (;;) {
    local = previousMatch(cron, local);
    if (local === null) return null;
    const instant = localToInstant(zone, local);
    if (instant <= atOrBefore) return instant;
    local -= MINUTE;
  }
}

// --- what a scheduler pass enqueues -------------------------------------------

/**
 * How late a pass may reach the most recent due occurrence for it to count as
 * current rather than missed.
 */
export const ON_TIME_MS = 2 * MINUTE;

export interface DueOccurrences {
  /** Oldest first: the occurrences to enqueue. */
  readonly enqueue: readonly number[];
  /** True when older due occurrences were passed over (missed beyond catchUp). */
  readonly skippedMissed: boolean;
  /** The first occurrence after `now`; null when none within eight years. */
  readonly next: number | null;
}

/**
 * The occurrences due at `now` of a schedule whose first unhandled occurrence
 * is `nextAt`: the most recent one when it is at most ON_TIME_MS old (current),
 * and the last `catchUp` of the older ones (missed). Reads at most
 * catchUp + 2 occurrences, however long the schedule was not served.
 */
export function dueOccurrences(
  cron: CronExpression,
  zone: string,
  params: { readonly nextAt: number; readonly now: number; readonly catchUp: number },
): DueOccurrences {
  const picked: number[] = [];
  let skippedMissed = false;
  let missedTaken = 0;
  let cursor = params.now;
  for (let first = true; ; first = false) {
    const occurrence = previousOccurrence(cron, zone, cursor);
    if (occurrence === null || occurrence < params.nextAt) break;
    if (first && occurrence >= params.now - ON_TIME_MS) picked.push(occurrence);
    else if (missedTaken < params.catchUp) {
      picked.push(occurrence);
      missedTaken++;
    } else {
      // Every older due occurrence is passed over too.
      skippedMissed = true;
      break;
    }
    cursor = occurrence - 1;
  }
  return { enqueue: picked.reverse(), skippedMissed, next: nextOccurrence(cron, zone, params.now) };
}

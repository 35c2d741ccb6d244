/**
 * The cron parser and the occurrence arithmetic of src/core/cron.ts, on fixed
 * instants: fields, names, steps and the Vixie day rule; next and previous
 * occurrences in UTC and in zones with daylight saving (America/New_York and
 * Europe/Berlin, spring forward and fall back); and what a scheduler pass
 * enqueues after downtime (catchUp).
 */

import { describe, expect, it } from 'vitest';
import {
  canonicalTimeZone,
  dueOccurrences,
  localToInstant,
  nextOccurrence,
  ON_TIME_MS,
  parseCron,
  previousOccurrence,
  zoneOffset,
  type CronExpression,
} from '../../src/core/cron.js';

function cron(text: string): CronExpression {
  const parsed = parseCron(text);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.cron;
}

const at = (iso: string): number => Date.parse(iso);
const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** The first `count` occurrences after `from`. */
function series(expression: string, zone: string, from: string, count: number): string[] {
  const parsed = cron(expression);
  const out: string[] = [];
  let cursor = at(from);
  for (let i = 0; i < count; i++) {
    const next = nextOccurrence(parsed, zone, cursor);
    if (next === null) break;
    out.push(iso(next) ?? '');
    cursor = next;
  }
  return out;
}

/** The last `count` occurrences at or before `from`, newest first. */
function seriesBack(expression: string, zone: string, from: string, count: number): string[] {
  const parsed = cron(expression);
  const out: string[] = [];
  let cursor = at(from);
  for (let i = 0; i < count; i++) {
    const previous = previousOccurrence(parsed, zone, cursor);
    if (previous === null) break;
    out.push(iso(previous) ?? '');
    cursor = previous - 1;
  }
  return out;
}

const minutesOf = (c: CronExpression): number[] => c.minutes.flatMap((on, i) => (on ? [i] : []));
const daysOfWeekOf = (c: CronExpression): number[] => c.daysOfWeek.flatMap((on, i) => (on ? [i] : []));

describe('parseCron', () => {
  it('reads stars, lists, ranges, steps and a/n steps', () => {
    expect(minutesOf(cron('*/15 * * * *'))).toEqual([0, 15, 30, 45]);
    expect(minutesOf(cron('1,2,10-12 * * * *'))).toEqual([1, 2, 10, 11, 12]);
    expect(minutesOf(cron('10-30/10 * * * *'))).toEqual([10, 20, 30]);
    expect(minutesOf(cron('50/5 * * * *'))).toEqual([50, 55]);
    expect(minutesOf(cron('  7   *  * * *  '))).toEqual([7]);
  });

  it("takes steps from 1 to the field's maximum, written as digits only", () => {
    expect(minutesOf(cron('*/1 * * * *'))).toHaveLength(60);
    expect(minutesOf(cron('*/59 * * * *'))).toEqual([0, 59]);
    for (const step of ['*/0', '*/60', '*/a1', '*/1a', '*/-1', '*/1.5']) {
      const parsed = parseCron(`${step} * * * *`);
      expect(parsed.ok, step).toBe(false);
    }
  });

  it('refuses values and range bounds that are not whole numbers or names of the field, saying which names it takes', () => {
    for (const text of ['x5 * * * *', '5x * * * *', '5-x * * * *', 'x-5 * * * *', '1-5-7 * * * *']) expect(parseCron(text).ok, text).toBe(false);
    const month = parseCron('0 0 * FOO *');
    expect(month.ok).toBe(false);
    if (!month.ok) expect(month.message).toBe('the month field "FOO" must hold values from 1 to 12 or names');
    const minute = parseCron('FOO * * * *');
    expect(minute.ok).toBe(false);
    if (!minute.ok) expect(minute.message).toBe('the minute field "FOO" must hold values from 0 to 59');
    const name = parseCron('@sometimes');
    expect(name.ok).toBe(false);
    if (!name.ok) expect(name.message).toContain('@daily');
  });

  it('reads month and weekday names in any case, and 7 as Sunday', () => {
    expect(daysOfWeekOf(cron('0 0 * * MON-FRI'))).toEqual([1, 2, 3, 4, 5]);
    expect(daysOfWeekOf(cron('0 0 * * sun,Sat'))).toEqual([0, 6]);
    expect(daysOfWeekOf(cron('0 0 * * 7'))).toEqual([0]);
    expect(daysOfWeekOf(cron('0 0 * * 5-7'))).toEqual([0, 5, 6]);
    expect(cron('0 0 1 jan-mar *').months.flatMap((on, i) => (on ? [i] : []))).toEqual([1, 2, 3]);
  });

  it('expands the @-names', () => {
    const same = (a: string, b: string): void => {
      const [x, y] = [cron(a), cron(b)];
      expect({ ...x, source: '' }).toEqual({ ...y, source: '' });
    };
    same('@yearly', '0 0 1 1 *');
    same('@annually', '0 0 1 1 *');
    same('@monthly', '0 0 1 * *');
    same('@weekly', '0 0 * * 0');
    same('@daily', '0 0 * * *');
    same('@midnight', '0 0 * * *');
    same('@hourly', '0 * * * *');
    expect(cron('@DAILY').source).toBe('@DAILY');
  });

  it.each([
    ['', 'empty'],
    ['* * * *', 'five fields'],
    ['* * * * * *', 'five fields'],
    ['60 * * * *', 'minute'],
    ['* 24 * * *', 'hour'],
    ['* * 0 * *', 'day of month'],
    ['* * 32 * *', 'day of month'],
    ['* * * 13 *', 'month'],
    ['* * * * 8', 'day of week'],
    ['*/0 * * * *', 'step'],
    ['5-1 * * * *', 'ends before it starts'],
    ['1-2-3 * * * *', 'more than one "-"'],
    ['*/2/3 * * * *', 'more than one "/"'],
    ['* * * FOO *', 'month'],
    ['@reboot', 'is not one of'],
    ['a * * * *', 'minute'],
    ['1,,2 * * * *', 'minute'],
    ['x'.repeat(201), 'longer than'],
  ])('refuses %j, naming the problem (%s)', (text, words) => {
    const parsed = parseCron(text);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.message).toContain(words);
  });
});

describe('the day fields (Vixie rule)', () => {
  it('matches either day field when both are restricted', () => {
    // The 13th, or any Friday: December 2026 has Friday 4, 11, 18, 25 and the 13th is a Sunday.
    expect(series('0 0 13 * FRI', 'UTC', '2026-12-01T00:00:00Z', 5)).toEqual([
      '2026-12-04T00:00:00.000Z',
      '2026-12-11T00:00:00.000Z',
      '2026-12-13T00:00:00.000Z',
      '2026-12-18T00:00:00.000Z',
      '2026-12-25T00:00:00.000Z',
    ]);
  });

  it('needs both when either starts with *', () => {
    expect(series('0 0 * * FRI', 'UTC', '2026-12-01T00:00:00Z', 2)).toEqual(['2026-12-04T00:00:00.000Z', '2026-12-11T00:00:00.000Z']);
    // "*/2" is a star for the rule: odd days that are Fridays.
    expect(series('0 0 */2 * FRI', 'UTC', '2026-12-01T00:00:00Z', 2)).toEqual(['2026-12-11T00:00:00.000Z', '2026-12-25T00:00:00.000Z']);
  });
});

describe('nextOccurrence and previousOccurrence in UTC', () => {
  it('steps minute by minute, strictly after the instant', () => {
    expect(series('* * * * *', 'UTC', '2026-01-01T00:00:00Z', 2)).toEqual(['2026-01-01T00:01:00.000Z', '2026-01-01T00:02:00.000Z']);
    expect(series('* * * * *', 'UTC', '2026-01-01T00:00:59.999Z', 1)).toEqual(['2026-01-01T00:01:00.000Z']);
  });

  it('crosses months, years and leap days', () => {
    expect(series('0 0 29 2 *', 'UTC', '2026-03-01T00:00:00Z', 2)).toEqual(['2028-02-29T00:00:00.000Z', '2032-02-29T00:00:00.000Z']);
    expect(series('@yearly', 'UTC', '2026-06-01T00:00:00Z', 2)).toEqual(['2027-01-01T00:00:00.000Z', '2028-01-01T00:00:00.000Z']);
    expect(series('0 12 31 * *', 'UTC', '2026-01-31T12:00:00Z', 2)).toEqual(['2026-03-31T12:00:00.000Z', '2026-05-31T12:00:00.000Z']);
  });

  it('answers null for an expression that names no time', () => {
    expect(nextOccurrence(cron('0 0 30 2 *'), 'UTC', at('2026-01-01T00:00:00Z'))).toBeNull();
    expect(previousOccurrence(cron('0 0 31 4 *'), 'UTC', at('2026-01-01T00:00:00Z'))).toBeNull();
  });

  it('walks back to the occurrence at or before the instant', () => {
    expect(seriesBack('*/20 * * * *', 'UTC', '2026-01-01T01:00:00Z', 4)).toEqual([
      '2026-01-01T01:00:00.000Z',
      '2026-01-01T00:40:00.000Z',
      '2026-01-01T00:20:00.000Z',
      '2026-01-01T00:00:00.000Z',
    ]);
    expect(seriesBack('0 9 * * MON', 'UTC', '2026-12-01T00:00:00Z', 1)).toEqual(['2026-11-30T09:00:00.000Z']);
  });

  it('uses the zone for wall-clock times', () => {
    // 09:00 in Kolkata (UTC+05:30) on weekdays; 2026-12-04 is a Friday.
    expect(series('0 9 * * MON-FRI', 'Asia/Kolkata', '2026-12-04T12:00:00Z', 1)).toEqual(['2026-12-07T03:30:00.000Z']);
  });
});

describe('daylight saving', () => {
  it('America/New_York spring forward (2026-03-08, 02:00 EST → 03:00 EDT): a skipped time runs once at 03:00', () => {
    expect(series('30 2 * * *', 'America/New_York', '2026-03-07T12:00:00Z', 3)).toEqual([
      '2026-03-08T07:00:00.000Z', // 03:00 EDT, in place of the skipped 02:30
      '2026-03-09T06:30:00.000Z', // 02:30 EDT
      '2026-03-10T06:30:00.000Z',
    ]);
    // Every quarter hour: 02:00, 02:15, 02:30 and 02:45 do not exist and fold into the one run at 03:00.
    expect(series('*/15 * * * *', 'America/New_York', '2026-03-08T06:30:00Z', 4)).toEqual([
      '2026-03-08T06:45:00.000Z', // 01:45 EST
      '2026-03-08T07:00:00.000Z', // 03:00 EDT
      '2026-03-08T07:15:00.000Z',
      '2026-03-08T07:30:00.000Z',
    ]);
  });

  it('America/New_York fall back (2026-11-01, 02:00 EDT → 01:00 EST): a repeated time runs once, the first', () => {
    expect(series('30 1 * * *', 'America/New_York', '2026-10-31T12:00:00Z', 2)).toEqual([
      '2026-11-01T05:30:00.000Z', // 01:30 EDT; not again at 01:30 EST (06:30Z)
      '2026-11-02T06:30:00.000Z', // 01:30 EST
    ]);
    expect(series('30 * * * *', 'America/New_York', '2026-11-01T04:00:00Z', 4)).toEqual([
      '2026-11-01T04:30:00.000Z', // 00:30 EDT
      '2026-11-01T05:30:00.000Z', // 01:30 EDT
      '2026-11-01T07:30:00.000Z', // 02:30 EST
      '2026-11-01T08:30:00.000Z',
    ]);
    // From inside the repeated hour (01:40 EST), previous finds 01:30 EDT and next does not answer 01:45 EDT.
    expect(seriesBack('30 * * * *', 'America/New_York', '2026-11-01T06:40:00Z', 2)).toEqual(['2026-11-01T05:30:00.000Z', '2026-11-01T04:30:00.000Z']);
    expect(series('45 * * * *', 'America/New_York', '2026-11-01T06:40:00Z', 1)).toEqual(['2026-11-01T07:45:00.000Z']);
  });

  it('Europe/Berlin spring forward (2026-03-29, 02:00 CET → 03:00 CEST)', () => {
    expect(series('30 2 * * *', 'Europe/Berlin', '2026-03-28T12:00:00Z', 2)).toEqual([
      '2026-03-29T01:00:00.000Z', // 03:00 CEST
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
    expect(seriesBack('30 2 * * *', 'Europe/Berlin', '2026-03-30T00:00:00Z', 2)).toEqual(['2026-03-29T01:00:00.000Z', '2026-03-28T01:30:00.000Z']);
  });

  it('Europe/Berlin fall back (2026-10-25, 03:00 CEST → 02:00 CET)', () => {
    expect(series('30 2 * * *', 'Europe/Berlin', '2026-10-24T12:00:00Z', 2)).toEqual([
      '2026-10-25T00:30:00.000Z', // 02:30 CEST; not again at 02:30 CET (01:30Z)
      '2026-10-26T01:30:00.000Z', // 02:30 CET
    ]);
    expect(seriesBack('30 2 * * *', 'Europe/Berlin', '2026-10-25T02:00:00Z', 1)).toEqual(['2026-10-25T00:30:00.000Z']);
  });

  it('maps local times to instants: the first of a repeated time, the end of a gap', () => {
    const local = (text: string): number => Date.parse(`${text}Z`);
    expect(iso(localToInstant('America/New_York', local('2026-11-01T01:30:00')))).toBe('2026-11-01T05:30:00.000Z');
    expect(iso(localToInstant('America/New_York', local('2026-03-08T02:30:00')))).toBe('2026-03-08T07:00:00.000Z');
    expect(iso(localToInstant('Europe/Berlin', local('2026-07-01T12:00:00')))).toBe('2026-07-01T10:00:00.000Z');
    expect(zoneOffset('Australia/Lord_Howe', at('2026-01-01T00:00:00Z'))).toBe(11 * 3_600_000);
    expect(zoneOffset('Australia/Lord_Howe', at('2026-07-01T00:00:00Z'))).toBe(10.5 * 3_600_000);
  });
});

describe('canonicalTimeZone', () => {
  it('knows IANA zones and refuses others', () => {
    expect(canonicalTimeZone('Europe/Berlin')).toBe('Europe/Berlin');
    expect(canonicalTimeZone('UTC')).toBe('UTC');
    expect(canonicalTimeZone('america/new_york')).toBe('America/New_York');
    expect(canonicalTimeZone('Mars/Olympus_Mons')).toBeNull();
    expect(canonicalTimeZone('')).toBeNull();
    expect(canonicalTimeZone('Europe/Berlin; DROP')).toBeNull();
  });
});

describe('dueOccurrences', () => {
  // Parsed inside each test, not while the file is collected: a mutant that breaks parseCron then fails tests
  // instead of failing the file's collection, which the mutation runner counts as no test at all.
  const everyMinute = (): CronExpression => cron('* * * * *');
  const base = at('2026-01-01T00:00:00Z');
  const minute = 60_000;

  it('enqueues the current occurrence when the pass is on time', () => {
    const due = dueOccurrences(everyMinute(), 'UTC', { nextAt: base + minute, now: base + minute + 5, catchUp: 0 });
    expect(due.enqueue).toEqual([base + minute]);
    expect(due.skippedMissed).toBe(false);
    expect(due.next).toBe(base + 2 * minute);
  });

  it('has nothing to enqueue before nextAt', () => {
    expect(dueOccurrences(everyMinute(), 'UTC', { nextAt: base + minute, now: base + minute - 1, catchUp: 5 }).enqueue).toEqual([]);
  });

  it('after downtime, catchUp 0 skips every missed occurrence and keeps the current one', () => {
    const due = dueOccurrences(everyMinute(), 'UTC', { nextAt: base + minute, now: base + 10 * minute + 5_000, catchUp: 0 });
    expect(due.enqueue).toEqual([base + 10 * minute]);
    expect(due.skippedMissed).toBe(true);
    expect(due.next).toBe(base + 11 * minute);
  });

  it('after downtime, catchUp N enqueues the last N missed ones too, oldest first', () => {
    const due = dueOccurrences(everyMinute(), 'UTC', { nextAt: base + minute, now: base + 10 * minute + 5_000, catchUp: 3 });
    expect(due.enqueue).toEqual([7, 8, 9, 10].map((m) => base + m * minute));
    // Fewer missed than N: all of them.
    expect(dueOccurrences(everyMinute(), 'UTC', { nextAt: base + 9 * minute, now: base + 10 * minute, catchUp: 5 }).enqueue).toEqual([
      base + 9 * minute,
      base + 10 * minute,
    ]);
  });

  it('counts an occurrence older than ON_TIME_MS as missed', () => {
    const daily = cron('0 3 * * *');
    const three = at('2026-01-01T03:00:00Z');
    expect(dueOccurrences(daily, 'UTC', { nextAt: three, now: three + ON_TIME_MS, catchUp: 0 }).enqueue).toEqual([three]);
    const late = dueOccurrences(daily, 'UTC', { nextAt: three, now: three + ON_TIME_MS + 1, catchUp: 0 });
    expect(late.enqueue).toEqual([]);
    expect(late.next).toBe(at('2026-01-02T03:00:00Z'));
    // Three days down with catchUp 2: the last two missed days.
    expect(dueOccurrences(daily, 'UTC', { nextAt: three, now: at('2026-01-04T08:00:00Z'), catchUp: 2 }).enqueue).toEqual([
      at('2026-01-03T03:00:00Z'),
      at('2026-01-04T03:00:00Z'),
    ]);
  });

  it('reads a bounded number of occurrences however long the downtime', () => {
    const started = performance.now();
    const due = dueOccurrences(everyMinute(), 'UTC', { nextAt: base, now: base + 365 * 24 * 60 * minute, catchUp: 2 });
    expect(due.enqueue).toHaveLength(3);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});

/** The soak's log search finds a leaked key or token wherever it sits in a line, and nothing else. */
import { expect, it } from 'vitest';
import { linesWithSecrets } from '../../bench/soak-secrets.js';
import { newApiKey, newLeaseToken } from '../../src/core/ids.js';

it('counts the lines that hold a key or a lease token, in JSON, glued to other characters or alone', () => {
  const key = newApiKey();
  const tokens = [newLeaseToken(), newLeaseToken(), newLeaseToken()];
  const outputs = [
    [
      '{"msg":"lease granted","jobId":"01JABCDEFGHJKMNPQRSTVWXYZ0"}',
      `{"msg":"oops","token":"${tokens[0]}"}`,
      `Authorization: Bearer ${key}`,
      `prefix-${tokens[1]}-suffix and more`,
      'nothing secret here',
    ].join('\n'),
    `x${tokens[2]}y`,
  ];
  expect(linesWithSecrets(outputs, [key], tokens)).toBe(4);
  expect(linesWithSecrets(outputs, [], [newLeaseToken()])).toBe(0);
});

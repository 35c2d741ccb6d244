/**
 * `keys create` and `keys revoke` write straight to the database: they are
 * how the first admin key comes to exist, before any coordinator could check
 * one. A new key is printed once, as the last line of stdout; only its
 * SHA-256 hash is stored.
 */

import { createApiKey } from '../../engine/api-keys.js';
import { isRole, ROLES } from '../../core/states.js';
import { CliError, requireOption, UsageError, type Command } from '../command.js';
import { openStore } from '../open-store.js';
import { printJson } from '../remote.js';
import { printTable } from '../table.js';

const DB_DETAIL = '--db FILE|URL          SQLite file or postgres:// URL (default: $LEASEHOLD_DB)';
const CREATE_DETAIL = '--create               create the SQLite file if it does not exist (otherwise a missing file is an error)';

export const keysCreate: Command = {
  name: 'keys create',
  summary: 'Create an API key for a tenant and user with a role; prints the key as the last line.',
  usage: 'keys create --db FILE|URL --tenant T --user U --role producer|worker|admin [--create] [--quiet]',
  details: [
    DB_DETAIL,
    '--tenant T             the tenant the key belongs to',
    '--user U               the user (owner of jobs it enqueues)',
    `--role R               one of ${ROLES.join(', ')}`,
    CREATE_DETAIL,
    '--quiet                print only the key (for KEY=$(leasehold keys create … --quiet))',
  ],
  options: {
    db: { type: 'string' },
    tenant: { type: 'string' },
    user: { type: 'string' },
    role: { type: 'string' },
    create: { type: 'boolean' },
    quiet: { type: 'boolean' },
  },
  async run({ values, io }) {
    const db = requireOption(values, 'db', keysCreate, io.env['LEASEHOLD_DB']);
    const tenant = requireOption(values, 'tenant', keysCreate);
    const user = requireOption(values, 'user', keysCreate);
    const role = requireOption(values, 'role', keysCreate);
    if (!isRole(role)) throw new UsageError(`--role must be one of ${ROLES.join(', ')} (got '${role}')`, keysCreate);
    const store = await openStore(db, { mustExist: values['create'] !== true });
    try {
      const { id, key } = await createApiKey(store, { tenant, user, role });
      if (values['quiet'] !== true) {
        io.out(`created ${role} key ${id} for tenant ${tenant}, user ${user}`);
        io.out('the key is shown once; only its hash is stored:');
      }
      io.out(key);
    } finally {
      await store.close();
    }
    return 0;
  },
};

export const keysRevoke: Command = {
  name: 'keys revoke',
  summary: 'Revoke an API key by its id (coordinators stop accepting it within their auth cache time).',
  usage: 'keys revoke --db FILE|URL --id ID',
  details: [DB_DETAIL, '--id ID                the key id printed by keys create'],
  options: { db: { type: 'string' }, id: { type: 'string' } },
  async run({ values, io }) {
    const db = requireOption(values, 'db', keysRevoke, io.env['LEASEHOLD_DB']);
    const id = requireOption(values, 'id', keysRevoke);
    // Revoking in a database that does not exist can only be a wrong --db: never create one.
    const store = await openStore(db, { mustExist: true });
    try {
      if (!(await store.apiKeyRevoke({ id }))) throw new CliError('not_found', `no active key with id ${id}`);
      io.out(`revoked key ${id}`);
    } finally {
      await store.close();
    }
    return 0;
  },
};

export const keysList: Command = {
  name: 'keys list',
  summary: "List a tenant's API keys: id, user, role, when created and revoked (never the key or its hash).",
  usage: 'keys list --db FILE|URL --tenant T [--json]',
  details: [DB_DETAIL, '--tenant T             the tenant whose keys to list', '--json                 one JSON document'],
  options: { db: { type: 'string' }, tenant: { type: 'string' }, json: { type: 'boolean' } },
  async run({ values, io }) {
    const db = requireOption(values, 'db', keysList, io.env['LEASEHOLD_DB']);
    const tenant = requireOption(values, 'tenant', keysList);
    const store = await openStore(db, { mustExist: true });
    try {
      const keys = (await store.apiKeyList({ tenant })).map((k) => ({
        id: k.id,
        user: k.user,
        role: k.role,
        createdAt: new Date(k.createdAt).toISOString(),
        revokedAt: k.revokedAt === null ? null : new Date(k.revokedAt).toISOString(),
      }));
      if (values['json'] === true) printJson(io, { keys });
      else
        printTable(
          io,
          ['ID', 'USER', 'ROLE', 'CREATED', 'REVOKED'],
          keys.map((k) => [k.id, k.user, k.role, k.createdAt, k.revokedAt ?? '-']),
        );
    } finally {
      await store.close();
    }
    return 0;
  },
};

export { createApiKey };

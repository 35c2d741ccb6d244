/** The one shape of every error answer: `{code, message}`, with a stable code clients switch on. */

import type { FastifyReply } from 'fastify';

export function sendError(reply: FastifyReply, status: number, code: string, message: string): FastifyReply {
  return reply.code(status).send({ code, message });
}

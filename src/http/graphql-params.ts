import type { NextFunction, Request, Response } from 'express';
import { queryOf } from './request.js';

/**
 * A GraphQL GET whose `variables` or `extensions` is not a JSON object is the client's mistake:
 * answered 400 BAD_USER_INPUT here, before graphql-yoga's parser throws a bare SyntaxError that
 * would be masked as an internal error.
 */
export function refuseMalformedGraphQLParams(req: Request, res: Response, next: NextFunction) {
  if (req.method !== 'GET') return next();
  const query = queryOf(req);
  for (const name of ['variables', 'extensions']) {
    const raw = query.get(name);
    if (raw === null || raw === '') continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      parsed = undefined;
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      res.status(400).json({
        errors: [{ message: `${name} must be a JSON object`, extensions: { code: 'BAD_USER_INPUT' } }],
      });
      return;
    }
  }
  next();
}

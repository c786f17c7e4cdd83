// inSequence: the /v1 stages run as one Express handler with Express's own semantics.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { describe, expect, it } from 'vitest';
import { inSequence } from '../src/pipeline/request-path.js';

const req = {} as Request;
const res = {} as Response;

function run(stages: RequestHandler[]): Promise<{ err: unknown; calls: string[] }> {
  return new Promise((resolve) => {
    const calls: string[] = [];
    const tracked = stages.map((s, i): RequestHandler => (q, r, n) => {
      calls.push(`s${i}`);
      return s(q, r, n);
    });
    inSequence(tracked)(req, res, ((err?: unknown) => resolve({ err, calls })) as NextFunction);
  });
}

const pass: RequestHandler = (_q, _r, next) => next();

describe('inSequence', () => {
  it('runs every stage in order, also across awaits, then hands on with no error', async () => {
    const asyncPass: RequestHandler = async (_q, _r, next) => {
      await new Promise((r) => setTimeout(r, 1));
      next();
    };
    expect(await run([pass, asyncPass, pass])).toEqual({ err: undefined, calls: ['s0', 's1', 's2'] });
  });

  it('stops at a stage that answers (does not call next)', async () => {
    let handedOn = false;
    const answer: RequestHandler = () => undefined;
    inSequence([pass, answer, pass])(req, res, (() => (handedOn = true)) as NextFunction);
    await new Promise((r) => setTimeout(r, 5));
    expect(handedOn).toBe(false);
  });

  it('passes next(err), a thrown error and a rejected promise to the error handler, skipping later stages', async () => {
    const boom = new Error('boom');
    expect(await run([(_q, _r, next) => next(boom), pass])).toEqual({ err: boom, calls: ['s0'] });
    expect(
      await run([
        pass,
        () => {
          throw boom;
        },
        pass,
      ]),
    ).toEqual({ err: boom, calls: ['s0', 's1'] });
    expect(await run([async () => Promise.reject(boom), pass])).toEqual({ err: boom, calls: ['s0'] });
  });
});

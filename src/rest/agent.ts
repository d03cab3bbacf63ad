import { type Request, type Response, Router } from 'express';
import type { Deps } from '../deps.js';
import { clientIp, wsAddressFor } from '../http/request.js';
import { requestSessionPort, SESSION_COOKIE } from '../http/session.js';
import { type CaptchaPurpose, issueCaptcha } from '../resolvers/captcha.js';
import { loginInput, parseInput, smsCaptchaInput, smsVerifyInput } from '../resolvers/inputs.js';
import { login, logout } from '../resolvers/login.js';
import { sendSmsCaptcha, verifySmsCode } from '../resolvers/sms.js';
import { requireAgent } from '../resolvers/viewer.js';
import { loadWorkbench } from '../resolvers/workbench.js';
import { envelope, sendError, sendOk } from './envelope.js';
import { legacyWorkbench } from './legacy.js';

/** The legacy `/agent/*` JSON and image endpoints (pages are in src/pages/). */
export function agentRoutes(deps: Deps): Router {
  const router = Router();
  const json = (handler: Parameters<typeof envelope>[1]) => envelope(deps.log, handler);

  // Captchas answer with an image, errors with the usual envelope.
  const captcha = (purpose: CaptchaPurpose) => async (req: Request, res: Response) => {
    try {
      const jpeg = await issueCaptcha(deps, requestSessionPort(req), purpose);
      res.set({ 'Content-Type': 'image/jpeg', 'Cache-Control': 'no-store' }).send(jpeg);
    } catch (error) {
      sendError(res, error, deps.log);
    }
  };
  router.get('/login/logincaptcha', captcha('login'));
  router.get('/login/joincaptcha', captcha('join'));

  router.post(
    '/login/check',
    json(async (req) =>
      login(deps, requestSessionPort(req), parseInput(loginInput, req.body), clientIp(req, deps.config)),
    ),
  );

  router.post('/login/smscaptcha', async (req, res) => {
    try {
      await sendSmsCaptcha(
        deps,
        requestSessionPort(req),
        parseInput(smsCaptchaInput, req.body),
        clientIp(req, deps.config),
      );
      sendOk(res, [], ''); // spec: code 0, msg "", data []
    } catch (error) {
      sendError(res, error, deps.log);
    }
  });

  router.post(
    '/login/smsverify',
    json(async (req) => {
      const input = parseInput(smsVerifyInput, req.body);
      await verifySmsCode(deps, requestSessionPort(req), input);
      return { mobile: input.mobile, verified: true };
    }),
  );

  router.post(
    '/logout',
    json(async (req, res) => {
      await logout(deps, requestSessionPort(req));
      res.clearCookie(SESSION_COOKIE, { path: '/' });
      return [];
    }),
  );

  router.get(
    '/data/get',
    json(async (req) => {
      const viewer = await requireAgent(deps, requestSessionPort(req));
      return legacyWorkbench(await loadWorkbench(deps, viewer, { wsAddress: wsAddressFor(req, deps.config) }));
    }),
  );

  return router;
}

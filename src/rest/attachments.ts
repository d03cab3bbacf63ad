import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import type { Request, Response } from 'express';
import { z } from 'zod';
import type { Deps } from '../deps.js';
import { badInput, DomainError } from '../errors.js';
import { closeLingering } from '../http/linger.js';
import { clientIp, pathOf, queryOf } from '../http/request.js';
import { discardUpload } from '../resolvers/attachments/cleanup.js';
import { type AttachmentVariant, authorizeDownload } from '../resolvers/attachments/download.js';
import { chargeDownload, downloaderOf, spendDownloadBytes } from '../resolvers/attachments/download-budgets.js';
import {
  ATTACHMENT_KINDS,
  declareKind,
  prepareUpload,
  type Uploader,
  uploaderOf,
} from '../resolvers/attachments/policy.js';
import { receiveUpload } from '../resolvers/attachments/upload.js';
import { type AttachmentView, attachmentWire, toAttachmentWire } from '../resolvers/event-catalog.js';
import { type AgentViewer, requireOnlineReception, type VisitorViewer } from '../resolvers/viewer.js';
import type { ObjectStorage } from '../stores/storage/index.js';
import { parseRange, writeHeaders } from './download-headers.js';
import { sendError, sendOk } from './envelope.js';
import { type AnyRoute, rawRoute } from './route.js';

/**
 * Attachments over HTTP (docs/attachments.md):
 * - `POST /visitor/upload` (visitor bearer) and `POST /agent/upload` (agent Session, online
 *   reception): `multipart/form-data` with the file in field `file` and an optional `kind`
 *   (field before the file, or query parameter) → `{attachment_id, kind, mime, size, name, url, thumbnail_url}`;
 * - `GET /attachments/:id` and `GET /attachments/:id/thumbnail`: a signed URL, or the visitor's
 *   bearer / the agent's Session; served with nosniff, and as a download unless it is a plain
 *   image, audio or video; byte ranges.
 * Bodies are streamed: no body parser runs on these paths.
 */
const uploadAnswer = z.object({ code: z.literal(0), msg: z.string(), data: attachmentWire }).strict();
const kindField = z
  .enum(['image', 'file', 'video', 'voice'])
  .optional()
  .openapi({ description: 'The attachment kind; derived from the bytes when absent.' });
/** The multipart body and query the upload handler reads as it streams (no body parser). */
const uploadRequest = {
  query: z.object({ kind: kindField }),
  body: {
    contentType: 'multipart/form-data',
    schema: z.object({
      kind: kindField,
      file: z.string().openapi({ type: 'string', format: 'binary', description: 'The file (one part named `file`).' }),
    }),
  },
};
/** The signature of a download URL and the byte range the download handler reads. */
const downloadRequest = {
  query: z.object({
    expires: z.string().optional().openapi({ description: 'Unix seconds; from the signed `url`.' }),
    sig: z.string().optional().openapi({ description: 'The URL signature; from the signed `url`.' }),
  }),
  headers: z.object({
    range: z
      .string()
      .optional()
      .openapi({ description: 'One byte range, `bytes=<start>-<end>` (answered 206, or 416).' }),
  }),
};
const upload = (identity: 'visitor' | 'agent', path: string) =>
  rawRoute({
    method: 'post',
    path,
    identity,
    tag: 'Attachments',
    summary: identity === 'visitor' ? 'Upload an attachment (visitor)' : 'Upload an attachment (agent)',
    description:
      '`multipart/form-data` with the file in field `file` and an optional `kind` (`image`, `file`, `video`, `voice`; a field before the file or a query parameter), else derived from the bytes. Enforced from the merchant’s own switches and limits (the bootstrap’s), refused as soon as the limit is passed; the type is decided from the bytes. Then send a message with its `attachment_id`.',
    encodings: ['multipart'],
    documented: uploadRequest,
    raw: { contentType: 'application/json', description: 'The stored attachment (envelope).', schema: uploadAnswer },
    errors: {
      400: 'Not multipart, no field `file`, an unknown kind, a type not accepted, or a video that is not a movie (1000).',
      403: 'The kind’s switch is off (1403), or a ticket agent.',
      413: 'The file passed the merchant’s limit for its kind (1413), refused as soon as it is passed: the bootstrap’s `upload_limits` (by default 20 MiB for an image, a file or a voice message, 100 MiB for a video); or the storage quota, or the image pixel budget `IMAGE_MAX_PIXELS` (every frame counted).',
      429: 'Too many uploads, or the visitor’s or address’s byte budget used up (1429); see Retry-After.',
      503: 'Image processing is busy (1503); see Retry-After.',
    },
    onError: ({ deps, req, res }, error) => refuseUpload(deps, req, res, error),
    handle: ({ deps, req, res, viewer }) =>
      streamUpload(deps, deps.storage, req, res, async () =>
        uploaderOf(viewer.kind === 'agent' ? requireOnlineReception(viewer) : viewer, clientIp(req, deps.config)),
      ),
  });

const download = (variant: AttachmentVariant, path: string) =>
  rawRoute({
    method: 'get',
    path,
    identity: 'participant',
    tag: 'Attachments',
    summary: variant === 'file' ? 'Download an attachment' : 'An image attachment’s thumbnail',
    description:
      'With the signed `expires` and `sig` of its `url` (no header needed, so `<img>` works), or the visitor bearer of its conversation, or an agent Session of its merchant (a ticket agent: 1403, as on the chat endpoints); anyone else gets 404. Sent with `X-Content-Type-Options: nosniff` and as a download unless a plain image, audio or video; byte ranges (206, 416).',
    documented: downloadRequest,
    raw: { contentType: 'application/octet-stream', description: 'The bytes (the stored type).', statuses: [200, 206] },
    errors: {
      403: 'A ticket agent without a signed URL (1403).',
      404: 'No such attachment for this caller (1404).',
      416: 'The range lies outside the file.',
      429: 'Past a download budget of the client address, or of the agent of the Session (1429): `ATTACHMENT_DOWNLOADS_PER_MINUTE`, `ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR`; see Retry-After.',
    },
    handle: ({ deps, req, res, viewer }) => serveAttachment(deps, deps.storage, req, res, variant, async () => viewer),
  });

export const attachmentEndpoints: AnyRoute[] = [
  upload('visitor', '/visitor/upload'),
  upload('agent', '/agent/upload'),
  download('file', '/attachments/:id'),
  download('thumbnail', '/attachments/:id/thumbnail'),
];

/**
 * Answers `GET /attachments/:id` (variant `file`) or `/attachments/:id/thumbnail`: authorized by
 * a valid signature or by `viewer` (resolved only when the URL is not validly signed); writes
 * the bytes, or a range of them, with the safe headers; a refusal is an envelope (404, 403, or
 * 429 past a download budget, charged before the attachment is looked up and its object opened).
 * For a route declaration: `handle: (ctx) => serveAttachment(ctx.deps, storage, ctx.req, ctx.res, 'file', async () => ctx.viewer)`.
 */
async function serveAttachment(
  deps: Deps,
  storage: ObjectStorage,
  req: Request,
  res: Response,
  variant: AttachmentVariant,
  viewer: () => Promise<VisitorViewer | AgentViewer | undefined>,
): Promise<void> {
  try {
    // Counted before anything is looked up or opened: a signed URL needs no identity (download-budgets.ts).
    const who = downloaderOf(await viewer().catch(() => undefined), clientIp(req, deps.config));
    await chargeDownload(deps, who);
    const id = String(req.params.id ?? '');
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) throw new DomainError('NOT_FOUND', 'No such attachment');
    const query = queryOf(req);
    const row = await authorizeDownload(deps, {
      id,
      variant,
      expires: query.get('expires') ?? undefined,
      sig: query.get('sig') ?? undefined,
      viewer,
    });
    const key = variant === 'file' ? row.storageKey : row.thumbnailKey;
    if (!key) throw new DomainError('NOT_FOUND', 'No such attachment');
    const size = variant === 'file' ? row.size : undefined;
    const range = size === undefined ? undefined : parseRange(req.headers.range, size);
    if (range === 'unsatisfiable') {
      res.status(416).setHeader('Content-Range', `bytes */${size}`).end();
      return;
    }
    const announced = req.method === 'HEAD' ? 0 : range ? range.end - range.start + 1 : size;
    const settle = await spendDownloadBytes(deps, who, announced);
    let sent = 0;
    try {
      const body = await storage.get(key, range);
      if (!body) throw new DomainError('NOT_FOUND', 'No such attachment');
      writeHeaders(res, row, variant, size, range);
      if (req.method === 'HEAD') {
        body.destroy();
        res.end();
        return;
      }
      body.on('data', (chunk: Buffer) => {
        sent += chunk.length;
      });
      await pipeline(body, res).catch(() => body.destroy());
    } finally {
      // A download cut short gives back the bytes it did not send.
      await settle(sent).catch((error: unknown) => deps.log.warn({ err: error }, 'download budget not settled'));
    }
  } catch (error) {
    sendError(res, error, deps.log);
  }
}

const kindOf = (value: string | null | undefined) => {
  if (value === null || value === undefined || value === '') return undefined;
  if (!(ATTACHMENT_KINDS as readonly string[]).includes(value))
    throw badInput('kind must be image, file, video or voice');
  return value as (typeof ATTACHMENT_KINDS)[number];
};

/**
 * Answers `POST /visitor/upload` and `POST /agent/upload`: `identify` gives the uploader (its
 * refusal is answered like any other), then the multipart body streams into the domain; the
 * answer's `data` has the shape of `attachmentWire` (src/resolvers/event-catalog.ts). A refusal
 * is answered at once and the rest of a large body is not read. For a route declaration
 * (encodings `['multipart']`, a raw route since it answers by itself):
 * `handle: (ctx) => streamUpload(ctx.deps, storage, ctx.req, ctx.res, async () => uploaderOf(ctx.viewer))`.
 */
async function streamUpload(
  deps: Deps,
  storage: ObjectStorage,
  req: Request,
  res: Response,
  identify: () => Promise<Uploader>,
) {
  let answered = false;
  /** The domain's work on the file, once it started: a refusal is answered only after it has cleaned up. */
  let receiving: Promise<AttachmentView | undefined> | undefined;
  const refuse = (error: unknown) => {
    if (answered) return;
    answered = true;
    refuseUpload(deps, req, res, error);
  };
  try {
    const uploader = await identify();
    if (!/^multipart\/form-data\b/i.test(req.headers['content-type'] ?? '')) {
      throw badInput('The upload must be multipart/form-data with the file in field "file"');
    }
    const length = req.headers['content-length'];
    const contentLength = length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined;
    const policy = await prepareUpload(deps, uploader, {
      declaredKind: kindOf(queryOf(req).get('kind')),
      contentLength,
    });
    const result = await parseUpload(deps, storage, req, { uploader, policy, contentLength }, (work) => {
      receiving = work;
    });
    answered = true;
    sendOk(req, res, toAttachmentWire(result));
  } catch (error) {
    // Nothing of a refused upload is left by the time it is answered: no scratch file, no object,
    // no row (an upload that finished as the request was being refused is removed again).
    const finished = await receiving;
    if (finished) await discardUpload(deps, storage, finished.attachmentId).catch(() => {});
    // A client that went away gets no answer (there is no one to read it).
    if (req.socket.destroyed) return;
    refuse(error);
  }
}

/** What is settled before the body is read: who uploads, under which limits. */
type UploadStart = {
  uploader: Uploader;
  policy: Awaited<ReturnType<typeof prepareUpload>>;
  contentLength: number | undefined;
};

/**
 * Streams the multipart body's one file into the domain and resolves with the stored attachment.
 * `track` is given the domain's work on the file as soon as it starts, so a refusal can wait for
 * its clean-up. A malformed form, a misplaced field or a client that goes away rejects, and stops
 * the domain's work with it.
 */
function parseUpload(
  deps: Deps,
  storage: ObjectStorage,
  req: Request,
  { uploader, policy, contentLength }: UploadStart,
  track: (receiving: Promise<AttachmentView | undefined>) => void,
): Promise<AttachmentView> {
  return new Promise<AttachmentView>((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        defParamCharset: 'utf8',
        limits: { files: 1, fields: 4, fieldSize: 256, parts: 6, headerPairs: 20 },
      });
    } catch {
      reject(badInput('Malformed multipart body'));
      return;
    }
    let started = false;
    let fileStream: Readable | undefined;
    const cancel = new AbortController();
    /** A refusal of the adapter's own (the body, the form): the domain's work on the file stops with it. */
    const fail = (error: unknown) => {
      const reason = error instanceof Error ? error : new Error(String(error));
      // A file still arriving fails with the reason (seen by the domain's pipeline, perhaps not
      // attached yet: hence the listener); after it, the signal stops the domain's work.
      fileStream?.on('error', () => {}).destroy(reason);
      cancel.abort(reason);
      reject(error);
    };
    // 'close' also comes after a body read to its end: only an incomplete one is an abort.
    const abort = () => {
      if (req.complete) return;
      fail(new Error('client aborted the upload'));
    };
    req.once('close', abort);
    parser.on('field', (name, value) => {
      try {
        const kind = name === 'kind' ? kindOf(value) : undefined;
        if (kind && started) throw badInput('Give kind before the file (or as a query parameter)');
        if (kind) declareKind(policy, kind, contentLength);
      } catch (error) {
        fail(error);
      }
    });
    parser.on('file', (name, stream, info) => {
      if (name !== 'file') {
        stream.resume();
        reject(badInput('The file must be in field "file"'));
        return;
      }
      started = true;
      fileStream = stream;
      const receiving = receiveUpload(deps, storage, uploader, policy, {
        stream,
        name: info.filename,
        signal: cancel.signal,
      }).then(
        (view) => {
          req.off('close', abort);
          resolve(view);
          return view;
        },
        (error: unknown) => {
          reject(error);
          return undefined;
        },
      );
      track(receiving);
    });
    parser.on('close', () => {
      if (!started) reject(badInput('Field "file" is required'));
    });
    parser.on('error', () => fail(badInput('Malformed multipart body')));
    req.pipe(parser);
  });
}

/**
 * Answers a refused upload at once. Nothing more of the body is parsed, counted or stored; what
 * the client still sends is discarded for a short while (`closeLingering`, src/http/linger.ts) so
 * that it can read this answer instead of a connection reset; then the socket goes.
 */
function refuseUpload(deps: Deps, req: Request, res: Response, error: unknown) {
  if (res.headersSent) return;
  req.unpipe();
  closeLingering(req, res);
  sendError(res, error, deps.log);
}

/** Upload requests stream for as long as their bytes take: the app's request deadline skips them. */
export const isStreamingUpload = (req: Request) =>
  req.method === 'POST' && (pathOf(req) === '/visitor/upload' || pathOf(req) === '/agent/upload');

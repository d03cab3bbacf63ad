import type { AttachmentsConfig } from '../../config.js';
import { badInput, DomainError } from '../../errors.js';
import { createWorkPool, type WorkPool } from './work-pool.js';

/**
 * Image re-encoding under a budget (README "Security and reliability", image uploads). A small
 * file can describe a huge picture (a 33 KB GIF of 7000×7000, an animation of many large
 * frames), and decoding it costs width × height × frames × a few bytes. So:
 * - the pixel budget `IMAGE_MAX_PIXELS` counts every frame, read from the header before any
 *   decoding (sharp's `limitInputPixels` is kept as a second guard);
 * - libvips runs one thread per image and keeps no operation cache, so a job's memory is its own
 *   picture's;
 * - at most `IMAGE_WORKERS` jobs run at once (`IMAGE_WORKERS_PER_MERCHANT` per merchant), the
 *   others wait in line up to `IMAGE_QUEUE_TIMEOUT_MS` (see work-pool.ts).
 * The memory this can take is therefore bounded by IMAGE_WORKERS × the cost of one picture at the
 * budget (measured in BENCHMARKS.md), whatever the number of uploads.
 */

/** Longest side of a thumbnail, in pixels (WebP). */
export const THUMBNAIL_PX = 320;

/** The image-work pool of an instance, from its configuration. */
export const createImagePool = (c: AttachmentsConfig): WorkPool =>
  createWorkPool({
    slots: c.imageWorkers,
    slotsPerTenant: Math.min(c.imageWorkersPerMerchant, c.imageWorkers),
    queuePerTenant: c.imageQueuePerMerchant,
    queueTimeoutMs: c.imageQueueTimeoutMs,
    what: 'Image processing',
  });

type Sharp = typeof import('sharp').default;
let loaded: Promise<Sharp> | undefined;
/** sharp on first use (as for the captcha), set up once: one libvips thread per image, no cache. */
function loadSharp(): Promise<Sharp> {
  loaded ??= import('sharp').then(({ default: sharp }) => {
    sharp.concurrency(1);
    sharp.cache(false);
    return sharp;
  });
  return loaded;
}

/** Pixels a picture decodes to: every frame of an animation counted (read from the header only). */
export async function pixelsOf(source: string): Promise<number> {
  const sharp = await loadSharp();
  // Without `animated`, height is one frame's and `pages` the number of frames.
  const meta = await sharp(source, { limitInputPixels: false }).metadata();
  const frameHeight = meta.pageHeight ?? meta.height ?? 0;
  return (meta.width ?? 0) * frameHeight * Math.max(1, meta.pages ?? 1);
}

const ANIMATED = new Set(['image/gif', 'image/webp']);

/**
 * Re-encodes an image in its own format without its metadata (EXIF, GPS, XMP…), and writes a
 * thumbnail when asked: refused over the pixel budget before decoding, then run in the pool.
 */
export async function reencodeImage(
  deps: { config: { attachments: AttachmentsConfig }; imageWork: WorkPool },
  merchantId: string,
  job: { source: string; target: string; thumbnail?: string; mime: string },
  signal?: AbortSignal,
): Promise<void> {
  const budget = deps.config.attachments.imageMaxPixels;
  let pixels: number;
  try {
    pixels = await pixelsOf(job.source);
  } catch {
    throw badInput(`The image could not be decoded (${job.mime})`);
  }
  if (pixels > budget) {
    throw new DomainError(
      'PAYLOAD_TOO_LARGE',
      `The image has ${pixels} pixels (every frame counted), more than the ${budget} allowed (IMAGE_MAX_PIXELS)`,
    );
  }
  await deps.imageWork.run(merchantId, () => encode(job, budget), signal);
}

async function encode(job: { source: string; target: string; thumbnail?: string; mime: string }, budget: number) {
  const sharp = await loadSharp();
  const { mime } = job;
  const animated = ANIMATED.has(mime);
  try {
    let image = sharp(job.source, { limitInputPixels: budget, animated, failOn: 'error' });
    // Apply the EXIF orientation before the EXIF goes (a no-op for animations, which carry none).
    if (!animated) image = image.rotate();
    const encoded =
      mime === 'image/jpeg'
        ? image.jpeg({ quality: 90, mozjpeg: false })
        : mime === 'image/png'
          ? image.png()
          : mime === 'image/webp'
            ? image.webp({ quality: 90 })
            : image.gif();
    await encoded.toFile(job.target);
    if (job.thumbnail) {
      await sharp(job.target, { limitInputPixels: budget })
        .resize(THUMBNAIL_PX, THUMBNAIL_PX, { fit: 'inside', withoutEnlargement: true })
        .webp({ quality: 70 })
        .toFile(job.thumbnail);
    }
  } catch {
    throw badInput(`The image could not be decoded (${mime})`);
  }
}

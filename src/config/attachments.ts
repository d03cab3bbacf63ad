import { z } from 'zod';
import { bool, int, type Parsed, url } from './variables.js';

/** Attachments (docs/attachments.md): the storage driver, the URLs, the upload budgets, images' work. */
export const attachmentVariables = {
  STORAGE_DRIVER: z.enum(['local', 's3']).default('local'),
  ATTACHMENTS_DIR: z.string().min(1).default('.data/attachments'),
  S3_ENDPOINT: url(['http:', 'https:']).optional(),
  S3_REGION: z.string().min(1).default('us-east-1'),
  S3_BUCKET: z.string().min(1).optional(),
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  S3_FORCE_PATH_STYLE: bool.default('off'),
  S3_KEY_PREFIX: z
    .string()
    .regex(/^[\w./-]{0,128}$/)
    .default(''),
  ATTACHMENT_URL_TTL_SECONDS: int(60, 7 * 86400).default(3600),
  ATTACHMENT_UNREFERENCED_TTL_SECONDS: int(60, 365 * 86400).default(3600),
  UPLOADS_PER_MINUTE: int(1, 10_000).default(20),
  UPLOAD_BYTES_PER_VISITOR_PER_HOUR: int(1024, 2 ** 50).default(200 * 1024 ** 2),
  UPLOAD_BYTES_PER_ADDRESS_PER_HOUR: int(1024, 2 ** 50).default(1024 ** 3),
  ATTACHMENT_DOWNLOADS_PER_MINUTE: int(1, 10_000_000).default(1200),
  ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR: int(1024, 2 ** 50).default(10 * 1024 ** 3),
  IMAGE_MAX_PIXELS: int(1, 1_000_000_000).default(16_777_216),
  IMAGE_WORKERS: int(1, 256).default(2),
  IMAGE_WORKERS_PER_MERCHANT: int(1, 256).default(1),
  IMAGE_QUEUE_PER_MERCHANT: int(0, 100_000).default(16),
  IMAGE_QUEUE_TIMEOUT_MS: int(100, 600_000).default(10_000),
};

export interface AttachmentsConfig {
  /** `local`: files under `dir`/objects; `s3`: an S3-compatible bucket. */
  driver: 'local' | 's3';
  /** The local driver's files, and the scratch directory (`incoming/`) of uploads in progress with either driver. */
  dir: string;
  s3?: {
    /** Unset: AWS S3 itself; otherwise MinIO, Cloudflare R2, Ceph… */
    endpoint?: string;
    region: string;
    bucket: string;
    /** Unset: the AWS SDK's default credential chain (instance role, AWS_* variables). */
    accessKeyId?: string;
    secretAccessKey?: string;
    forcePathStyle: boolean;
    /** Prepended to every object key (several deployments can share one bucket). */
    keyPrefix: string;
  };
  /** Lifetime of a signed download URL, in seconds. */
  urlTtlSeconds: number;
  /** An upload no message references is removed after this many seconds. */
  unreferencedTtlSeconds: number;
  /** Uploads per identity (visitor or agent) per minute. */
  uploadsPerMinute: number;
  /** Bytes a visitor may upload per hour (all its uploads counted, sent as messages or not). */
  uploadBytesPerVisitorPerHour: number;
  /** Bytes visitors from one client address may upload per hour, whatever their tokens. */
  uploadBytesPerAddressPerHour: number;
  /** Downloads per client address (an agent's Session: per agent) per minute, signed URLs included. */
  downloadsPerMinute: number;
  /** Bytes downloaded per client address (an agent's Session: per agent) per hour. */
  downloadBytesPerHour: number;
  /** The pixel budget of an image upload, every frame of an animation counted. */
  imageMaxPixels: number;
  /** Image re-encoding jobs at once on the instance. */
  imageWorkers: number;
  /** Image re-encoding jobs at once for one merchant. */
  imageWorkersPerMerchant: number;
  /** Image jobs of one merchant waiting for a slot at once (more are refused at once). */
  imageQueuePerMerchant: number;
  /** How long an image job waits for a slot before it is refused (503, Retry-After). */
  imageQueueTimeoutMs: number;
}

export interface AttachmentSettings {
  /** Attachments (docs/attachments.md): where files are stored and how they are served. */
  attachments: AttachmentsConfig;
}

export function attachmentProblems(e: Parsed<typeof attachmentVariables>): string[] {
  const problems: string[] = [];
  if (e.STORAGE_DRIVER === 's3' && !e.S3_BUCKET) problems.push('S3_BUCKET: required when STORAGE_DRIVER=s3');
  if (Boolean(e.S3_ACCESS_KEY_ID) !== Boolean(e.S3_SECRET_ACCESS_KEY))
    problems.push('S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY: give both or neither');
  return problems;
}

export function readAttachmentSettings(e: Parsed<typeof attachmentVariables>): AttachmentSettings {
  return {
    attachments: {
      driver: e.STORAGE_DRIVER,
      dir: e.ATTACHMENTS_DIR,
      s3:
        e.STORAGE_DRIVER === 's3' && e.S3_BUCKET
          ? {
              endpoint: e.S3_ENDPOINT,
              region: e.S3_REGION,
              bucket: e.S3_BUCKET,
              accessKeyId: e.S3_ACCESS_KEY_ID,
              secretAccessKey: e.S3_SECRET_ACCESS_KEY,
              forcePathStyle: e.S3_FORCE_PATH_STYLE,
              keyPrefix: e.S3_KEY_PREFIX,
            }
          : undefined,
      urlTtlSeconds: e.ATTACHMENT_URL_TTL_SECONDS,
      unreferencedTtlSeconds: e.ATTACHMENT_UNREFERENCED_TTL_SECONDS,
      uploadsPerMinute: e.UPLOADS_PER_MINUTE,
      uploadBytesPerVisitorPerHour: e.UPLOAD_BYTES_PER_VISITOR_PER_HOUR,
      uploadBytesPerAddressPerHour: e.UPLOAD_BYTES_PER_ADDRESS_PER_HOUR,
      downloadsPerMinute: e.ATTACHMENT_DOWNLOADS_PER_MINUTE,
      downloadBytesPerHour: e.ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR,
      imageMaxPixels: e.IMAGE_MAX_PIXELS,
      imageWorkers: e.IMAGE_WORKERS,
      imageWorkersPerMerchant: e.IMAGE_WORKERS_PER_MERCHANT,
      imageQueuePerMerchant: e.IMAGE_QUEUE_PER_MERCHANT,
      imageQueueTimeoutMs: e.IMAGE_QUEUE_TIMEOUT_MS,
    },
  };
}

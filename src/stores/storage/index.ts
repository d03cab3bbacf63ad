import type { AttachmentsConfig } from '../../config.js';
import { localObjectStorage } from './local.js';
import type { ObjectStorage } from './object-storage.js';

export type { ByteRange, ObjectStorage } from './object-storage.js';

/** The driver the configuration names; the S3 SDK is loaded only when it is the one. */
export async function createObjectStorage(config: AttachmentsConfig): Promise<ObjectStorage> {
  if (config.driver === 's3') {
    if (!config.s3) throw new Error('STORAGE_DRIVER=s3 needs S3_BUCKET');
    const { s3ObjectStorage } = await import('./s3.js');
    return s3ObjectStorage(config.s3);
  }
  return localObjectStorage(config.dir);
}

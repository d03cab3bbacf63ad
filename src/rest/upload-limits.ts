import { z } from 'zod';

/** The upload limits as both the visitor bootstrap's `setting` and the admin settings answer them (bytes). */
export const uploadLimitsData = z
  .object({
    image_max_bytes: z.number(),
    file_max_bytes: z.number(),
    video_max_bytes: z.number(),
    voice_max_bytes: z.number(),
  })
  .strict();

export interface UploadLimits {
  imageMaxBytes: number;
  fileMaxBytes: number;
  videoMaxBytes: number;
  voiceMaxBytes: number;
}

export const legacyUploadLimits = (l: UploadLimits): z.input<typeof uploadLimitsData> => ({
  image_max_bytes: l.imageMaxBytes,
  file_max_bytes: l.fileMaxBytes,
  video_max_bytes: l.videoMaxBytes,
  voice_max_bytes: l.voiceMaxBytes,
});

import env from '#start/env'
import { defineConfig, drivers } from '@adonisjs/core/encryption'

/**
 * Encrypts secrets stored at rest (agent provider keys and tokens).
 */
const encryptionConfig = defineConfig({
  default: 'gcm',
  list: {
    gcm: drivers.aes256gcm({
      id: 'gcm',
      keys: [env.get('APP_KEY', '')],
    }),
  },
})

export default encryptionConfig

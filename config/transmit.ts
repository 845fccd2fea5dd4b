import env from '#start/env'
import { defineConfig } from '@adonisjs/transmit'
import { redis } from '@adonisjs/transmit/transports/redis'
import { redisOptionsFromUrl } from '#config/redis'

/**
 * Live console updates (Server-Sent Events). With REDIS_URL every instance
 * relays broadcasts through Redis, so a browser on one instance sees events
 * raised on another; without it broadcasts stay in this process.
 */
const redisUrl = env.get('REDIS_URL')

export default defineConfig({
  pingInterval: '25s',
  transport: redisUrl
    ? { driver: redis({ ...redisOptionsFromUrl(redisUrl), keyPrefix: 'transmit:' }) }
    : null,
})

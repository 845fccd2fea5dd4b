import { configApp } from '@adonisjs/eslint-config'

export default configApp({
  ignores: ['build/**', 'storage/**', 'tmp/**', 'node_modules/**'],
})

import type { HttpContext } from '@adonisjs/core/http'
import openApiService from '#core/openapi/openapi_service'
import { NotFoundException } from '#core/exceptions/api_exceptions'

export default class OpenApiController {
  async document({ response }: HttpContext) {
    // Sent as a string so the envelope middleware leaves the document as it is.
    response.header('content-type', 'application/json; charset=utf-8')
    return response.send(await openApiService.document())
  }

  async explorer({ response }: HttpContext) {
    response.header('content-type', 'text/html; charset=utf-8')
    return response.send(openApiService.explorerPage())
  }

  async asset({ params, response }: HttpContext) {
    const asset = openApiService.explorerAsset(params.file)
    if (!asset) throw new NotFoundException(`No explorer file "${params.file}"`)
    response.header('content-type', asset.contentType)
    response.header('cache-control', 'public, max-age=86400')
    return response.download(asset.path)
  }
}

import type { FailedTransactionMetadata } from 'litesvm'

/** A transaction error as JSON-RPC reports it (`meta.err`, `status.Err`). */
export type RpcTransactionError = string | Record<string, unknown>

// Names of LiteSVM's numeric (const enum) errors, in enum order: the strings a node prints.
const transactionErrorNames = [
  'AccountInUse',
  'AccountLoadedTwice',
  'AccountNotFound',
  'ProgramAccountNotFound',
  'InsufficientFundsForFee',
  'InvalidAccountForFee',
  'AlreadyProcessed',
  'BlockhashNotFound',
  'CallChainTooDeep',
  'MissingSignatureForFee',
  'InvalidAccountIndex',
  'SignatureFailure',
  'InvalidProgramForExecution',
  'SanitizeFailure',
  'ClusterMaintenance',
  'AccountBorrowOutstanding',
  'WouldExceedMaxBlockCostLimit',
  'UnsupportedVersion',
  'InvalidWritableAccount',
  'WouldExceedMaxAccountCostLimit',
  'WouldExceedAccountDataBlockLimit',
  'TooManyAccountLocks',
  'AddressLookupTableNotFound',
  'InvalidAddressLookupTableOwner',
  'InvalidAddressLookupTableData',
  'InvalidAddressLookupTableIndex',
  'InvalidRentPayingAccount',
  'WouldExceedMaxVoteCostLimit',
  'WouldExceedAccountDataTotalLimit',
  'MaxLoadedAccountsDataSizeExceeded',
  'ResanitizationNeeded',
  'InvalidLoadedAccountsDataSizeLimit',
  'UnbalancedTransaction',
  'ProgramCacheHitMaxLimit',
  'CommitCancelled',
]

const instructionErrorNames = [
  'GenericError',
  'InvalidArgument',
  'InvalidInstructionData',
  'InvalidAccountData',
  'AccountDataTooSmall',
  'InsufficientFunds',
  'IncorrectProgramId',
  'MissingRequiredSignature',
  'AccountAlreadyInitialized',
  'UninitializedAccount',
  'UnbalancedInstruction',
  'ModifiedProgramId',
  'ExternalAccountLamportSpend',
  'ExternalAccountDataModified',
  'ReadonlyLamportChange',
  'ReadonlyDataModified',
  'DuplicateAccountIndex',
  'ExecutableModified',
  'RentEpochModified',
  'NotEnoughAccountKeys',
  'AccountDataSizeChanged',
  'AccountNotExecutable',
  'AccountBorrowFailed',
  'AccountBorrowOutstanding',
  'DuplicateAccountOutOfSync',
  'InvalidError',
  'ExecutableDataModified',
  'ExecutableLamportChange',
  'ExecutableAccountNotRentExempt',
  'UnsupportedProgramId',
  'CallDepth',
  'MissingAccount',
  'ReentrancyNotAllowed',
  'MaxSeedLengthExceeded',
  'InvalidSeeds',
  'InvalidRealloc',
  'ComputationalBudgetExceeded',
  'PrivilegeEscalation',
  'ProgramEnvironmentSetupFailure',
  'ProgramFailedToComplete',
  'ProgramFailedToCompile',
  'Immutable',
  'IncorrectAuthority',
  'AccountNotRentExempt',
  'InvalidAccountOwner',
  'ArithmeticOverflow',
  'UnsupportedSysvar',
  'IllegalOwner',
  'MaxAccountsDataAllocationsExceeded',
  'MaxAccountsExceeded',
  'MaxInstructionTraceLengthExceeded',
  'BuiltinProgramsMustConsumeComputeUnits',
  'BorshIoError',
]

function instructionError(error: unknown): RpcTransactionError {
  if (typeof error === 'number') return instructionErrorNames[error] ?? 'InvalidError'
  const value = error as { code?: number; msg?: string }
  if (typeof value.code === 'number') return { Custom: value.code }
  return { BorshIoError: value.msg ?? '' }
}

/** LiteSVM's error object as the JSON a node returns: `{ InstructionError: [1, { Custom: 1 }] }`. */
export function rpcTransactionError(
  error: ReturnType<FailedTransactionMetadata['err']>
): RpcTransactionError {
  if (typeof error === 'number') return transactionErrorNames[error] ?? 'SanitizeFailure'
  const value = error as unknown as {
    constructor: { name: string }
    index?: number
    accountIndex?: number
    err?: () => unknown
  }
  if (typeof value.err === 'function') {
    return { InstructionError: [value.index, instructionError(value.err())] }
  }
  if (value.constructor.name.includes('DuplicateInstruction')) {
    return { DuplicateInstruction: value.index }
  }
  if (value.constructor.name.includes('InsufficientFundsForRent')) {
    return { InsufficientFundsForRent: { account_index: value.accountIndex } }
  }
  return { ProgramExecutionTemporarilyRestricted: { account_index: value.accountIndex } }
}

// Package acl models Redis 7.0's ACL users and rules exactly (acl.c of
// redis-server 7.0.15): the rule grammar of ACL SETUSER, the users'
// descriptions (ACL LIST, ACL GETUSER, the ACL file), the permission
// checks of commands, keys and channels, ACL DRYRUN, ACL CAT, ACL
// GENPASS, the ACL file (ACL LOAD, ACL SAVE) and the ACL LOG's entry
// merging. It is pure: no I/O, no clock, the standard library and
// internal/glob (Redis's stringmatchlen) only.
//
// # The command universe
//
// Commands is the set of commands rules name: Redis's (RedisCommands,
// generated from a running redis-server 7.0.15 by
// scripts/genaclcmds/gen.py into commands_redis.go, with arities, the
// no_auth flag and the ACL categories, those Redis derives from the
// command flags included) plus the caller's own (NewCommands' extra
// CommandSpecs, e.g. kvorum's LEASE and LOCK with their categories). Each
// command and subcommand has an ID indexing the users' command bitmaps.
// The categories (Category, Cat*) are Redis's, in Redis's order.
//
// # Users
//
// A Registry holds the users, starting with Redis's default user ("on
// nopass ~* &* +@all"). SetUser is ACL SETUSER: all rules or none, with
// Redis's error texts; DelUser, Usernames, Lines (ACL LIST) and User are
// the rest of the user commands. A User is a handle: a change replaces
// its rules atomically, so connections that hold it see the change on
// their next check, as in Redis. Rules covered: on, off, nopass,
// resetpass, >pw, <pw, #hash, !hash, reset, skip-sanitize-payload,
// sanitize-payload, ~pat, %R~pat, %W~pat, %RW~pat, allkeys, resetkeys,
// &pat, allchannels, resetchannels, +cmd, -cmd, +cmd|sub, -cmd|sub,
// +cmd|firstarg, +@cat, -@cat, allcommands, nocommands, selectors
// "(...)" (given as one argument or spread over several) and
// clearselectors. Passwords are kept as their SHA-256 hex digest, as in
// Redis.
//
// Describe (ACL LIST's "user <name> <rules>") and Info (ACL GETUSER:
// flags, passwords, commands, keys, channels, selectors) give Redis's
// text, the command rules by Redis's greedy category fit. Redis emits the
// single-command rules that follow the categories in its command table's
// hash order, which differs between runs; here they are in name order
// (the same set of rules, a container's before its subcommands').
//
// Replication: a registry is rebuilt from Lines (the ACL file format)
// with SyncLines, which keeps the handles of the users that stay, or
// LoadLines, which is ACL LOAD (Load is ACL LOAD of a file's content with
// its error messages and line numbers, SaveFile what ACL SAVE writes), or
// by replaying SetUser (Apply) and DelUser calls in order: all are
// deterministic.
//
// # Checks
//
// User.Check is the hot-path check (ACLCheckAllUserCommandPerm): the
// command's bit in a precomputed bitmap, then its keys, then its
// channels, selector by selector. The caller finds keys (KeySource, with
// key-spec flags as KeyFlags; it is called only when a selector
// restricts keys); channels of PUBLISH, SPUBLISH, SUBSCRIBE, SSUBSCRIBE
// and PSUBSCRIBE (whose patterns must match an allowed pattern
// literally) are found here. No check allocates; one for a user allowed
// everything takes some tens of nanoseconds (BenchmarkCheck).
// CheckKey, CheckChannel and CheckUnrestrictedKeys are Redis's other
// checks. Denial's methods give Redis's error texts (NOPERM replies,
// script and EXEC variants, ACL LOG reasons); Registry.DryRun is ACL
// DRYRUN with its messages; ErrWrongPass, ErrNoAuth and the other Err*
// constants are the authentication errors.
//
// Log is the ACL LOG with Redis's merging of equal entries (same
// reason, context, object and user within 60 s, among the 10 newest),
// time given by the caller.
//
// # Left to the caller
//
// Connections (which user a connection is, AUTH and HELLO AUTH, NOAUTH
// before authentication, closing the connections of deleted users and
// of Pub/Sub subscribers that lose a channel), the replies' RESP
// encoding, key extraction (kvorum's key specs), where the ACL file is
// and reading or writing it, Raft replication of the user changes, the
// ACL LOG's client info and clock, acllog-max-len and
// acl-pubsub-default (fixed at Redis 7.0's default, resetchannels),
// users defined in the server configuration (redis.conf "user" lines),
// and modules.
//
// # Differences from Redis
//
// "%" and "%~pat" (a key pattern without R or W) are refused as a syntax
// error: Redis 7.0.15 accepts them and then crashes describing the user.
// An ACL file line with an unclosed selector after other rules is
// refused: Redis then reads freed memory. The ACL LOG entry has Redis
// 7.2's ID and creation time besides 7.0's fields.
//
// # Tests
//
// The differential files (testdata/diff, testdata/aclfile.txt) hold
// redis-server 7.0.15's replies, recorded with -rewrite: rule
// sequences, errors, descriptions, selectors, DRYRUN of every command of
// a category for restricted users, AUTH and ACL files. The package must
// give the same replies, and when redis-server is installed the tests
// also check that it still gives the recorded ones.
package acl

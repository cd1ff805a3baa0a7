//! A DescribeTransactions whose answer is taken only once another broker
//! confirms that the broker which answered is the coordinator
//! ([`Client::describe_transaction_confirmed`]).
//!
//! # Why
//!
//! A transaction coordinator cut off from its peers and from the controller
//! while clients still reach it goes on answering DescribeTransactions from
//! memory, without an error, for as long as the cut lasts: after the
//! broker session (`broker.session.timeout.ms`) the controller fences it and
//! moves its `__transaction_state` partitions, a successor mints a newer
//! epoch at the new coordinator, and the cut-off broker still names the
//! old one. Its own FindCoordinator names itself, so neither the age limit
//! of the cached coordinator ([`super::COORDINATOR_MAX_AGE`]) nor a lookup
//! that happens to land on it again moves a client off it.
//!
//! # How
//!
//! After the answer arrives, FindCoordinator for the same id is asked of
//! the cluster's *other* brokers (the broker list of a Metadata request,
//! not the bootstrap addresses, which may be aliases of the one that
//! answered), one after another until one names the broker that answered.
//! Then the answer is taken. Brokers are told apart by node id, not by
//! address (an address is one listener of one broker, and Metadata may
//! list the broker that answered under another), so it is never asked to
//! confirm itself. When every broker that answered names another
//! broker, the answer is refused: the coordinator is forgotten and asked
//! last (`Attempt::Moved`), so the retry looks it up at the others, which
//! name the new coordinator. When no other broker answers, the answer is
//! not taken either, and the call ends [`Error::Transient`] at its deadline
//! saying so. A cluster of one broker has no peer to be cut off from and no
//! broker to move a partition to: its answers are taken as they are.
//!
//! FindCoordinator at another broker was chosen over the alternatives:
//!
//! - Metadata for `__transaction_state` at another broker, checking the
//!   leader of the id's partition (`abs(String.hashCode(id)) %
//!   transaction.state.log.num.partitions`, Kafka's
//!   `TransactionStateManager.partitionFor`), says the same thing (a
//!   broker answers FindCoordinator with that leader from its metadata
//!   image) at the cost of the hash, the partition count and a larger
//!   answer.
//! - A leader epoch check needs an epoch to compare, and DescribeTransactions
//!   carries none.
//! - Asking only the first other broker and refusing when it disagrees would
//!   refuse every answer of the *real* coordinator whenever that broker is
//!   the cut-off one (which names itself): any one broker naming the broker
//!   that answered is enough, and only the cut-off broker's own view is
//!   excluded, since it never confirms itself.
//!
//! # Bound
//!
//! The cut-off broker cannot mint a newer epoch itself (its writes to
//! `__transaction_state` cannot reach `min.insync.replicas` replicas), so
//! its answers are right until a successor mints at the new coordinator,
//! which happens only after the cluster moved the partition. Every broker
//! in contact with the controller names the new coordinator from then on
//! (its metadata image follows the controller's log), and the confirmation
//! is asked after the answer arrived: a stale answer given after the
//! successor's mint is taken only if a *second* broker is as far behind the
//! controller as the cut-off one (cut off too). With at most one broker cut
//! off, no answer given after the successor's mint calls the deposed token
//! current.
//!
//! # Cost
//!
//! One FindCoordinator at another broker after each DescribeTransactions
//! (two round trips, one after the other), and a Metadata for the broker
//! list once per [`BROKERS_MAX_AGE`] per client, or at the next describe
//! when not one broker of the list answered (it is asked again, at another
//! bootstrap broker first: brokers replaced under new addresses, or the
//! view of a broker behind the others). A refused answer costs a
//! FindCoordinator at each other broker, then the lookup and the describe
//! again. The lease writers' own describes
//! ([`Client::describe_at_coordinator`]) do not take this path: their
//! safety rests on the broker's fence, not on the answer.

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};

/// Kafka's internal topic of transaction coordinators.
const TXN_STATE_TOPIC: &str = "__transaction_state";

use super::coordinator::Found;
use super::routes::Suspect;
use super::*;

/// How long the cluster's broker list (from Metadata) is used before it is
/// asked again.
pub const BROKERS_MAX_AGE: Duration = Duration::from_secs(60);

/// The brokers Metadata listed (node id and address, in node id order), and
/// how many brokers the cluster has (see [`Client::cluster_brokers`]).
pub(super) type KnownBrokers = (Vec<(i32, String)>, usize);

/// The broker list of [`Client::cluster_brokers`].
#[derive(Debug, Default)]
pub(super) struct BrokerList {
    /// The list, when it was learned, and the bootstrap broker that gave it.
    known: Option<(Instant, KnownBrokers, String)>,
    /// The bootstrap broker whose list confirmed nothing: the next Metadata
    /// asks it last.
    avoid: Option<String>,
}

impl Client {
    /// What the coordinator of `transactional_id` reports (as
    /// [`Client::describe_transaction`]), taken only once another broker
    /// of the cluster names the broker that answered as the coordinator
    /// (see the `confirm` module). A coordinator no other broker confirms
    /// is forgotten and the id looked up again at the others; none
    /// answering by the operation timeout is [`Error::Transient`] naming
    /// why.
    pub async fn describe_transaction_confirmed(
        &self,
        transactional_id: &str,
    ) -> Result<Option<TransactionDescription>> {
        crate::error::check_transactional_id(transactional_id)?;
        let context = || {
            format!(
                "DescribeTransactions for {}, confirmed at another broker",
                crate::error::quote(transactional_id)
            )
        };
        let (deadline, budget) = self.deadline(self.inner.timeout);
        self.retrying(context, deadline, budget, Backoff::LOOKUP, || {
            self.describe_confirmed_once(transactional_id, deadline)
        })
        .await
    }

    /// One DescribeTransactions at the coordinator, then its confirmation
    /// ([`Client::confirm_coordinator`]); a refused confirmation forgets
    /// the coordinator (through [`Client::at`]).
    async fn describe_confirmed_once(
        &self,
        transactional_id: &str,
        deadline: Instant,
    ) -> Result<Option<TransactionDescription>, Attempt> {
        self.at(
            Target::Coordinator(transactional_id),
            deadline,
            |at| async move {
                let addr = at.addr.clone();
                let described = self.describe_at(&at, transactional_id).await?;
                // The connection goes back before the other brokers are asked.
                drop(at);
                self.confirm_coordinator(transactional_id, &addr, deadline)
                    .await?;
                Ok(described)
            },
        )
        .await
    }

    /// Asks FindCoordinator for `transactional_id` at the cluster's brokers
    /// other than `addr` (those not stalled first) until one names `addr`:
    /// `Ok` then, or at once when the cluster has no other broker.
    /// [`Attempt::Moved`] when every one that answered named another
    /// broker; [`Attempt::Again`] when none answered.
    ///
    /// Brokers are told apart by node id where it is known (the
    /// FindCoordinator that named `addr` gave it, else the Metadata list
    /// entry of `addr`), not by address alone: an address is one listener
    /// of a broker, and the broker that answered, listed under another
    /// address (another listener, another name), would otherwise be asked
    /// to confirm itself, and a broker naming it under another address
    /// would be taken as naming another broker.
    async fn confirm_coordinator(
        &self,
        transactional_id: &str,
        addr: &str,
        deadline: Instant,
    ) -> Result<(), Attempt> {
        let (listed, nodes) = self.cluster_brokers(deadline).await?;
        let node = self
            .coordinator_node(transactional_id, addr)
            .or_else(|| listed.iter().find(|(_, a)| a == addr).map(|(n, _)| *n));
        let is_it = |named_node: i32, named: &str| match node {
            Some(n) => named_node == n,
            None => named == addr,
        };
        let mut peers: Vec<String> = listed
            .into_iter()
            .filter(|(n, a)| !is_it(*n, a) && a != addr)
            .map(|(_, a)| a)
            .collect();
        if peers.is_empty() {
            if nodes <= 1 {
                return Ok(());
            }
            self.forget_brokers();
            return Err(Attempt::Again(format!(
                "the answer of {addr} to DescribeTransactions for {} is not taken: the cluster \
                 has {nodes} brokers, and Metadata listed no other to confirm it is the \
                 coordinator",
                crate::error::quote(transactional_id)
            )));
        }
        // A stable sort: the brokers not stalled first, in node id order.
        peers.sort_by_key(|b| self.is_stalled(b));
        let named_others = StdMutex::new(Vec::<String>::new());
        // Whether any broker of the list answered FindCoordinator at all.
        let heard = AtomicBool::new(false);
        let asked = self
            .at_each(peers, deadline, |at| {
                let named_others = &named_others;
                let heard = &heard;
                async move {
                    let found = self
                        .find_coordinator(&at, transactional_id, KEY_TYPE_TRANSACTION)
                        .await?;
                    heard.store(true, Ordering::Relaxed);
                    match found {
                        Found::At { addr: named, node } if is_it(node, &named) => Ok(()),
                        Found::At { addr: named, .. } => {
                            let said = format!("{} names {named}", at.addr);
                            named_others
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(said.clone());
                            Err(Attempt::Again(said))
                        }
                        Found::Refused { code, what } => {
                            Err(Attempt::Again(format!("{what}: {}", code_name(code))))
                        }
                    }
                }
            })
            .await;
        match asked {
            Ok(()) => Ok(()),
            Err(Attempt::Fail(e)) => Err(Attempt::Fail(e)),
            Err(other) => Err(self.not_confirmed(
                transactional_id,
                addr,
                other,
                named_others.into_inner().unwrap_or_else(|e| e.into_inner()),
                heard.into_inner(),
            )),
        }
    }

    /// Why the answer of `addr` about `transactional_id` is not taken, once
    /// asking the other brokers ended in `other`: [`Attempt::Moved`] when
    /// some named another coordinator (`named_others`), else
    /// [`Attempt::Again`]; when not one of them answered (`heard` false) the
    /// cached broker list is forgotten, as it may be out of date.
    fn not_confirmed(
        &self,
        transactional_id: &str,
        addr: &str,
        other: Attempt,
        others: Vec<String>,
        heard: bool,
    ) -> Attempt {
        let id = crate::error::quote(transactional_id);
        if others.is_empty() {
            if !heard {
                // Not one broker of the list answered: it may be
                // out of date (brokers replaced under new
                // addresses) or the view of a broker behind the
                // others.
                self.forget_brokers();
            }
            Attempt::Again(format!(
                "the answer of {addr} to DescribeTransactions for {id} is not taken: no \
                 other broker confirmed it is the coordinator ({})",
                match other {
                    Attempt::Moved(r)
                    | Attempt::NoAnswer(r)
                    | Attempt::Again(r)
                    | Attempt::Busy(r) => r,
                    Attempt::Fail(e) => e.to_string(),
                }
            ))
        } else {
            Attempt::Moved(format!(
                "the answer of {addr} to DescribeTransactions for {id} is not taken: it \
                 may be cut off from the cluster, whose other brokers name another \
                 coordinator ({})",
                others.join("; ")
            ))
        }
    }

    /// The addresses of the cluster's brokers a Metadata request at a
    /// bootstrap broker lists, and how many brokers the cluster has: those
    /// listed and those holding a replica of `__transaction_state` (a
    /// broker cut off from the controller may list only itself, but its
    /// partitions' replicas still name its peers). Cached for
    /// [`BROKERS_MAX_AGE`], or until a confirmation finds no broker of it
    /// to answer ([`Client::forget_brokers`]).
    async fn cluster_brokers(&self, deadline: Instant) -> Result<KnownBrokers, Attempt> {
        let avoid = {
            let list = self.inner.brokers.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((learned, known, _)) = &list.known {
                if learned.elapsed() < BROKERS_MAX_AGE {
                    return Ok(known.clone());
                }
            }
            list.avoid.clone().map(|addr| Suspect {
                addr,
                named_by: None,
            })
        };
        let (known, named_by) = self
            .at_bootstrap_avoiding(deadline, avoid.as_ref(), |at| async move {
                let version = at.version(ApiKey::Metadata, (1, 12), "")?;
                let mut topic = MetadataRequestTopic::default();
                topic.name = Some(TopicName(StrBytes::from_static_str(TXN_STATE_TOPIC)));
                let mut req = MetadataRequest::default();
                req.topics = Some(vec![topic]);
                req.allow_auto_topic_creation = false;
                let resp: MetadataResponse =
                    self.exchange(&at, ApiKey::Metadata, version, &req).await?;
                let mut brokers: Vec<(i32, String)> = resp
                    .brokers
                    .iter()
                    .map(|b| (b.node_id.0, format_addr(b.host.as_str(), b.port)))
                    .collect();
                brokers.sort();
                // A topic this principal may not describe names no replica:
                // the listed brokers are all that is known then.
                let mut nodes: std::collections::BTreeSet<i32> =
                    brokers.iter().map(|(id, _)| *id).collect();
                for t in &resp.topics {
                    for p in &t.partitions {
                        nodes.extend(p.replica_nodes.iter().map(|n| n.0));
                    }
                }
                Ok(((brokers, nodes.len()), at.addr.clone()))
            })
            .await?;
        let mut list = self.inner.brokers.lock().unwrap_or_else(|e| e.into_inner());
        list.known = Some((Instant::now(), known.clone(), named_by));
        list.avoid = None;
        Ok(known)
    }

    /// Forgets the broker list, so the next confirmation asks Metadata
    /// again, at the bootstrap broker that gave this list last: a list of
    /// which no broker answered is no use for [`BROKERS_MAX_AGE`].
    fn forget_brokers(&self) {
        let mut list = self.inner.brokers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, named_by)) = list.known.take() {
            list.avoid = Some(named_by);
        }
    }
}

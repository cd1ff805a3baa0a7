//! Waiting for several futures at once without spawning tasks.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Runs `futures` concurrently on the calling task and returns their
/// outputs in order (no task is spawned, so nothing outlives a caller that
/// stops waiting).
pub(crate) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, out) in futures.iter_mut().zip(outputs.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future is ready"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn join_all_keeps_the_order() {
        let futures = (0..5u64)
            .map(|i| async move {
                tokio::time::sleep(Duration::from_millis(5 * (5 - i))).await;
                i
            })
            .collect();
        assert_eq!(join_all(futures).await, vec![0, 1, 2, 3, 4]);
    }
}

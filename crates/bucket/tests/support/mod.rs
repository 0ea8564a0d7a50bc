pub mod seaweed;
